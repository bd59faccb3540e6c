"""The H200's power model: the H100's (same GH100 die) with one constant refitted.

The H200 has no measured energy at hand; its one measured throughput (gpus.yaml
``h200_measured`` bf16 8192^3, 769-798 TFLOP/s, tag M) is where ``power.core_energy_scale``
is fitted (``archsim.silicon.fit_core_scale_to_throughput``); the V-f curve and the per-clock
energy are the H100's. Checked on what was not fitted: the sustained SM clock other projects
report on H200 under dense MMA (tag C) and the memory-bound kernels' full clock.
"""

from __future__ import annotations

from archsim import silicon
from archsim.api import load
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Elementwise, Gemm
from tests.gpu.gpu_helpers import gpu

BF16 = FORMATS["bf16"]


def _gemm(m: int, n: int, k: int) -> Gemm:
    return Gemm(name="g", m=m, n=n, k=k, a_format=BF16, w_format=BF16)


def test_config_scale_is_the_fit_to_the_measured_throughput() -> None:
    """configs/gpu/h200.yaml holds the scale the fit gives for the middle of 769-798."""
    fitted = silicon.fit_core_scale_to_throughput("gpu/h200", _gemm(8192, 8192, 8192), 783.5)
    assert abs(fitted / gpu("h200").spec.power.core_energy_scale - 1) < 0.03


def test_transferred_constants_are_the_h100s() -> None:
    """Same die: the V-f curve and the per-clock energy are the H100 card's fit."""
    p200, p100 = gpu("h200").spec.power, gpu("h100").spec.power
    assert (p200.vf_mhz, p200.vf_volts) == (p100.vf_mhz, p100.vf_volts)
    assert p200.active_pj_per_cycle == p100.active_pj_per_cycle


def test_sustained_gemm_clock_matches_reports() -> None:
    """TileOPs#1587: ~1500 MHz sustainable on H200; DeepGEMM#120: 1980 -> 1575 MHz under
    dense MMA (tag C, not fitted): the capped clock at 8192^3 lies within 10% of that range,
    and the board sits at its 700 W limit."""
    e = gpu("h200").estimate(_gemm(8192, 8192, 8192))
    assert 1500 * 0.9 <= e.details["clock_mhz"] <= 1575 * 1.1
    assert e.details["power_capped"]
    assert 0.95 * 700 <= e.details["power_w"] <= 700


def test_memory_bound_kernels_run_at_the_top_clock() -> None:
    """A GEMV and a copy are HBM-bound: under the limit at 1980 MHz, like the H100's
    (silicon/README.md: memory-bound kernels at the full 1.98 GHz)."""
    u = gpu("h200")
    copy = Elementwise(name="copy", rows=1 << 14, cols=1 << 15, fn="copy", a_format=BF16)
    for op in (_gemm(1, 8192, 8192), copy):
        e = u.estimate(op)
        assert e.details["clock_mhz"] == 1980 and not e.details["power_capped"]
        assert 134.9 < e.details["power_w"] < 700


def test_more_energy_per_mma_lowers_the_clock() -> None:
    """The mechanism the fit relies on: a larger per-action scale gives a lower capped clock
    (and so a lower throughput) on the same kernel."""
    clocks = [load("gpu/h200", [f"units[0].power.core_energy_scale={s}"]).units[0]
              .estimate(_gemm(8192, 8192, 8192)).details["clock_mhz"] for s in (3.0, 4.0, 5.0)]
    assert clocks[0] > clocks[1] > clocks[2]
