"""The H200's power model: the H100's (same GH100 die), every constant carried.

The per-action energy scale is the H100 card's fit (on H100 board energy); the H200 rows our
harness measured (``tests/data/silicon/h200_2026-11-26.jsonl``, sustained ~4 s loops, never
fitted) check it. gpus.yaml ``h200_measured`` (bf16 8192^3, 769-798 TFLOP/s) is a ten-call
burst: fitting the scale to it (``archsim.silicon.fit_core_scale_to_throughput``) needs far
less energy per MMA than either card's sustained rows show (docs/gpu.md "H200").
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


def test_scale_is_the_die_constant_and_the_burst_figure_is_not_sustained() -> None:
    """configs/gpu/h200.yaml carries the H100 card's per-action scale; the scale that would
    reproduce the public burst figure (783.5 TFLOP/s) is < 80 % of it, while our own sustained
    H200 8192^3 rows run 1.58-1.66 ms = 662-695 TFLOP/s, the H100's 1.60-1.69 ms."""
    assert gpu("h200").spec.power.core_energy_scale == gpu("h100").spec.power.core_energy_scale
    burst = silicon.fit_core_scale_to_throughput("gpu/h200", _gemm(8192, 8192, 8192), 783.5)
    assert burst < 0.8 * gpu("h200").spec.power.core_energy_scale
    e = gpu("h200").estimate(_gemm(8192, 8192, 8192))
    assert 1.58 * 0.95 <= e.latency_s * 1e3 <= 1.66 * 1.05


def test_transferred_constants_are_the_h100s() -> None:
    """Same die: the V-f curve and the per-clock energy are the H100 card's fit."""
    p200, p100 = gpu("h200").spec.power, gpu("h100").spec.power
    assert (p200.vf_mhz, p200.vf_volts) == (p100.vf_mhz, p100.vf_volts)
    assert p200.active_pj_per_cycle == p100.active_pj_per_cycle


def test_sustained_gemm_clock_and_power_match_our_h200_rows() -> None:
    """Our harness's sustained H200 rows (tests/data/silicon/h200_2026-11-26.jsonl, NVML clock
    at the end of a ~4 s loop): bf16 4096^3 1485 MHz, bf16 16384^3 1440 MHz, fp8 8192^3 1335
    MHz at 690-696 W. The capped clock lies within 15 % of the bf16 rows (the H100 model's own
    clock bias on its re-measured rows: median -2.3 %, worst -10 %) and within 20 % of the fp8
    row (the H100 model's fp8 clock is already 5 % low on its own card, 1125 vs 1185 MHz: the
    validation gap "H100 best-of-sweep fp8"), at the 700 W limit. (Kernel projects report
    1500-1575 MHz on H200 under dense MMA: TileOPs#1587, DeepGEMM#120.)"""
    fp8 = FORMATS["fp8_e4m3"]
    for op, mhz, tol in ((_gemm(4096, 4096, 4096), 1485, 0.15),
                         (_gemm(16384, 16384, 16384), 1440, 0.15),
                         (Gemm(name="g", m=8192, n=8192, k=8192, a_format=fp8, w_format=fp8),
                          1335, 0.20)):
        e = gpu("h200").estimate(op)
        assert abs(e.details["clock_mhz"] / mhz - 1) <= tol, (op, e.details["clock_mhz"])
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
