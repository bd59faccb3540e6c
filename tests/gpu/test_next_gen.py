"""Blackwell (``gpu/b200``, ``gpu/gb200``) predicted from spec sheets, and the FP4/FP6 formats.

Nothing here is a B200 measurement: the expected values are the vendor's spec-sheet figures
(HGX B200 / GB200 NVL72 datasheets, dense = half the sparse figure), worked out by hand, and
properties that must hold whatever the carried constants are.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from archsim.arch.gpu.precision import narrow_float_refusal, plan_mma
from archsim.workloads.formats import FORMATS as F
from archsim.workloads.ops import Gemm
from tests.gpu.gpu_helpers import ROOT, gpu

G = Gemm(name="g", m=8, n=8, k=8)


def _peak_pflops(name: str, fmt: str) -> float:
    """Dense peak at the spec's boost clock, in PFLOP/s (2 FLOP per MAC)."""
    u = gpu(name)
    op = Gemm(name="g", m=8, n=8, k=8, a_format=F[fmt], w_format=F[fmt])
    return u.peak_macs_per_cycle(op) * 2 * u.spec.boost_clock_mhz * 1e6 / 1e15


@pytest.mark.parametrize(("name", "fmt", "pflops"), [
    # HGX B200 datasheet, per GPU, dense: bf16 2.25, fp8 4.5, fp6 4.5, fp4 9 PFLOPS
    ("b200", "bf16", 2.25), ("b200", "fp8_e4m3", 4.5), ("b200", "fp6_e3m2", 4.5),
    ("b200", "fp4", 9.0), ("b200", "nvfp4", 9.0),
    # GB200 NVL72 datasheet, per GPU, dense: bf16 2.5, fp8 5, fp4 10 PFLOPS
    ("gb200", "bf16", 2.5), ("gb200", "fp8_e4m3", 5.0), ("gb200", "mxfp4", 10.0),
])
def test_blackwell_peaks_are_the_spec_sheets(name: str, fmt: str, pflops: float) -> None:
    # e.g. B200 bf16: 148 SMs x 4 TCs x 1024 FMA x 2 x 1.856 GHz = 2.250 PFLOP/s
    assert _peak_pflops(name, fmt) == pytest.approx(pflops, rel=0.01)


def test_fp4_formats_store_what_the_specs_say() -> None:
    # NVFP4: 4-bit E2M1 + one 8-bit E4M3 scale per 16 = 4.5 bits; MXFP4: + 8 bits per 32
    assert F["nvfp4"].bits_per_element == 4.5
    assert F["mxfp4"].bits_per_element == 4.25
    assert (F["fp4"].exponent_bits, F["fp4"].mantissa_bits) == (2, 1)
    assert F["fp6_e2m3"].bits == F["fp6_e3m2"].bits == 6


def test_hopper_refuses_fp4_and_names_what_it_can_run() -> None:
    h = gpu("h100")
    why = narrow_float_refusal(h.spec, F["nvfp4"], F["nvfp4"])
    assert why is not None and "fp4" in why and "bf16" in why and "fp8_e4m3" in why
    assert h.supports(Gemm(name="g", m=64, n=64, k=64, a_format=F["fp4"], w_format=F["fp4"]))
    # weight-only FP4 (16-bit activations) is a Marlin-style dequantising kernel everywhere
    assert h.supports(Gemm(name="g", m=64, n=64, k=64, a_format=F["bf16"],
                           w_format=F["fp4"])) is None
    assert plan_mma(h.spec, F["bf16"], F["fp4"], 1.0).path == "w_only"
    # Blackwell runs FP4 x FP4 on its own rate, no conversion
    p = plan_mma(gpu("b200").spec, F["nvfp4"], F["nvfp4"], 1.0)
    assert (p.path, p.tc_format, p.a_convert_ops, p.b_convert_ops) == ("tc", "fp4", 0.0, 0.0)


def test_lower_precision_is_faster_on_blackwell_and_capped_by_its_power() -> None:
    """A dense 8192^3 GEMM: each halving of the operand width doubles the MMA rate, so it
    must get faster (bf16 > fp8 > fp4), and at 1000 W the board sits at its limit."""
    u = gpu("b200")
    t = {}
    for f in ("bf16", "fp8_e4m3", "nvfp4"):
        e = u.estimate(Gemm(name="g", m=8192, n=8192, k=8192, a_format=F[f], w_format=F[f]))
        t[f] = e.latency_s
        assert e.details["power_w"] <= 1000.0 + 1e-6
    assert t["bf16"] > t["fp8_e4m3"] > t["nvfp4"]


def test_weight_streaming_scales_with_the_spec_bandwidth() -> None:
    """GEMV 1 x 16384 x 16384 bf16 streams 512 MiB of weights: its time ratio between B200 and
    H200 is the ratio of their HBM bandwidths (7.7 vs 4.8 TB/s, same 0.9 efficiency) within
    the fixed launch and latency terms (~5 %)."""
    op = Gemm(name="g", m=1, n=16384, k=16384)
    ratio = gpu("h200").estimate(op).latency_s / gpu("b200").estimate(op).latency_s
    assert ratio == pytest.approx(7700 / 4800, rel=0.05)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "archsim", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_cli_runs_blackwell_with_fp4_and_hopper_refuses_it() -> None:
    ok = _cli("gemm", "gpu/b200", "--m", "4096", "--n", "4096", "--k", "4096",
              "--a-format", "nvfp4", "--w-format", "nvfp4")
    assert ok.returncode == 0, ok.stderr
    assert "warning" not in ok.stderr          # nvfp4 runs on the fp4 rate: nothing to warn
    bad = _cli("gemm", "gpu/h100", "--m", "4096", "--n", "4096", "--k", "4096",
               "--a-format", "fp4", "--w-format", "fp4")
    assert bad.returncode == 2
    assert "fp4" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_cli_runs_llama3_70b_fp4_on_b200() -> None:
    r = _cli("run", "gpu/b200", "--model", "llama3-70b", "--w-format", "fp4", "--json")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", ["a100", "b200", "gb200"])
def test_align1_kernels_carry_their_absolute_rate_per_sm_clock(name: str) -> None:
    """The Turing-class align1 kernels are bound by their 1-element loads, not the tensor
    core: the H100-fitted fraction x the H100's bf16 rate per SM is the same absolute FMA rate
    per SM clock on every GPU carrying it (0.0925 x 2048 = 189.4 FMA/clock/SM)."""
    h, u = gpu("h100").spec, gpu(name).spec
    absolute = h.tensor_core.align1_rate_fraction * h.tc_rate_per_sm("bf16")
    assert u.tensor_core.align1_rate_fraction * u.tc_rate_per_sm("bf16") == pytest.approx(
        absolute, rel=0.01)
