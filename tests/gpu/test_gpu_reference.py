"""Reference tests: predictions vs measured GPU figures in ../shared/reference/.

Each test names the file and key of its figure and states its tolerance with a reason.
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_helpers import SHARED_REF, gpu  # noqa: E402

from archsim.workloads.formats import FORMATS  # noqa: E402
from archsim.workloads.ops import Elementwise, Gemm  # noqa: E402

BF16 = FORMATS["bf16"]

if not (SHARED_REF / "gpus.yaml").exists():
    pytest.skip(f"reference figures not found at {SHARED_REF}", allow_module_level=True)


def _gpus_yaml() -> dict:
    return yaml.safe_load((SHARED_REF / "gpus.yaml").read_text())


def _tflops(name: str, m: int, n: int, k: int, fmt=BF16) -> float:
    e = gpu(name).estimate(Gemm(name="g", m=m, n=n, k=k, a_format=fmt, w_format=fmt))
    return 2.0 * m * n * k / e.latency_s / 1e12


def test_a100_fp16_gemm_sweep() -> None:
    """a100_gemm_measured.csv (LLMCompass, real A100 SXM, N=K=12288, fp16).

    Tolerance: median |err| <= 10%, worst <= 25% (issue 5); the measurement includes
    PyTorch host overhead (~20 us, per LLMCompass) that the model does not include.
    """
    rows = [r for r in csv.DictReader(
        line for line in (SHARED_REF / "a100_gemm_measured.csv").read_text().splitlines()
        if not line.startswith("#"))]
    assert len(rows) == 10
    errs = []
    for r in rows:
        m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
        pred_ms = gpu("a100").estimate(Gemm(name="g", m=m, n=n, k=k)).latency_s * 1e3
        errs.append(abs(pred_ms - float(r["latency_ms"])) / float(r["latency_ms"]))
    assert statistics.median(errs) <= 0.10, errs
    assert max(errs) <= 0.25, errs


def test_h200_bf16_8192_cubed() -> None:
    """gpus.yaml h200_measured.bf16_gemm_8192_cubed_tflops.random_data = [769, 798] is a
    ten-call burst (no flush) the power limiter has not settled on; the model is the
    sustained cap. So the prediction lies within 10 % of our own sustained H200 rows
    (tests/data/silicon/h200_2026-11-26.jsonl: 1.58-1.66 ms = 662-695 TFLOP/s) and below the
    burst figure's low end (a gap in docs/validation.md)."""
    lo, _ = _gpus_yaml()["h200_measured"]["bf16_gemm_8192_cubed_tflops"]["random_data"]
    pred = _tflops("h200", 8192, 8192, 8192)
    assert 662 * 0.9 <= pred <= 695 * 1.1, pred
    assert pred < lo, pred


def test_h200_device_to_device_copy() -> None:
    """gpus.yaml h200_measured.device_to_device_copy_tbps = 4.3 (bytes read + written / time).

    Tolerance 10% (issue 5). Not independent: the HBM efficiency 0.9 is this figure / 4.8.
    """
    ref = _gpus_yaml()["h200_measured"]["device_to_device_copy_tbps"]
    op = Elementwise(name="copy", rows=1 << 15, cols=1 << 15, fn="copy", a_format=BF16)  # 2 GiB
    e = gpu("h200").estimate(op)
    tbps = (e.dram_read_bytes + e.dram_write_bytes) / e.latency_s / 1e12
    assert tbps == pytest.approx(ref, rel=0.10)


@pytest.mark.parametrize("name,key,fmt,shape_key", [
    ("a100", "a100_sxm", "bf16", "shape_mnk"),
    ("h100", "h100_sxm", "bf16", "shape_mnk"),
    pytest.param("h200", "h200_sxm", "fp8_e4m3", "fp8_shape_mnk", marks=pytest.mark.xfail(
        strict=True, reason="known gap (docs/validation.md): 1216 TFLOP/s predicted (-16.4%); "
        "the H100's fp8 gap below on the same die and constants")),
    pytest.param("h100", "h100_sxm", "fp8_e4m3", "fp8_shape_mnk", marks=pytest.mark.xfail(
        strict=True, reason="known gap (docs/validation.md): 1244 TFLOP/s predicted (-11.3%); "
        "the fp8 clock is 5% low against held-out silicon too")),
])
def test_best_of_sweep_gemm(name: str, key: str, fmt: str, shape_key: str) -> None:
    """gpus.yaml measured_best_gemm_tflops (ml-engineering mamf-finder v2 sweep), timed the
    way that script timed it: a 256 MiB memset and an output copy before every call
    (arch.gpu.bench.MAMF_FINDER_V2). Tolerance 10%: best-of-sweep figures favour lucky shapes.
    """
    from archsim.arch.gpu.bench import MAMF_FINDER_V2, timed_call_s

    ref = _gpus_yaml()["measured_best_gemm_tflops"][key]
    m, n, k = ref[shape_key]
    f = FORMATS[fmt]
    t = timed_call_s(gpu(name), Gemm(name="g", m=m, n=n, k=k, a_format=f, w_format=f),
                     MAMF_FINDER_V2)
    assert 2 * m * n * k / t / 1e12 == pytest.approx(ref[fmt], rel=0.10)


def test_flush_window_raises_the_clock_of_short_calls_only() -> None:
    """Property of the protocol model: a memset between calls can only lower the average
    power, so a capped GEMM runs at least as fast timed with flushes as back to back, and a
    memory-bound kernel (never capped) gains nothing from the window."""
    from archsim.arch.gpu.bench import DO_BENCH, MAMF_FINDER_V2, timed_call_s

    u = gpu("h100")
    g = Gemm(name="g", m=4096, n=4096, k=4096, a_format=FORMATS["bf16"],
             w_format=FORMATS["bf16"])
    sustained = u.estimate(g).latency_s
    for p in (DO_BENCH, MAMF_FINDER_V2):
        assert timed_call_s(u, g, p) < sustained
    v = Elementwise(name="v", rows=8192, cols=8192, fn="silu", a_format=FORMATS["bf16"])
    assert timed_call_s(u, v, DO_BENCH) >= u.estimate(v).latency_s
