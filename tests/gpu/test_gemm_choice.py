"""Issue 26: runtime protocols (isolated vs back-to-back launch), the GEMM kernel class chosen
by row alignment, and the framework kernel tables (shared/reference/kernels_h100/README.md)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import archsim.arch.gpu.gemm as gemm_mod
import archsim.calibration as cal_mod
import archsim.kernel_tables as kernel_tables
from archsim import silicon
from archsim.api import load
from archsim.arch.gpu.choice import gemm_kernel_class, row_alignment_bytes
from archsim.arch.gpu.gemm import TILE_SWITCH_ROUND_TRIPS
from archsim.arch.gpu.kernels import row_quant_s
from archsim.cli import main
from archsim.kernel_tables import (
    TABLE_SWITCHING_ACTIVITY,
    back_to_back,
    fit_quant_call_us,
    fit_switching_activity,
    gemm_row_estimate,
    kernel_class,
    load_kernel_rows,
    predict_b2b_ms,
    shape_half,
)
from archsim.workloads.errors import ConfigError, MappingError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Gemm
from tests.gpu.gpu_helpers import SHARED_REF

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "silicon"
KERNELS = SHARED_REF / "kernels_h100"
needs_tables = pytest.mark.skipif(not KERNELS.exists(), reason="../shared/ not present")
BF16 = FORMATS["bf16"]


def _gemm_rows(name: str) -> list[dict]:
    return [r.data for r in silicon.load_rows(DATA / name)
            if r.kind == "gemm" and r.data["dtype"] == "bf16"]


# ---------------------------------------------------------------- alignment -> kernel class


@pytest.mark.parametrize(("elems", "bits", "align"), [
    (4096, 16, 16),    # 8192 B
    (4100, 16, 8),     # 8200 B = 8 x 1025
    (4095, 16, 2),     # 8190 B = 2 x 4095
    (50257, 16, 2),    # odd element count, 2-byte elements
    (50257, 8, 1),     # odd byte count
    (36, 16, 8),       # 72 B
])
def test_row_alignment_closed_form(elems: int, bits: int, align: int) -> None:
    assert row_alignment_bytes(elems, bits) == align


def test_kernel_class_by_alignment() -> None:
    """16-byte rows: TMA kernels; 4/8-byte: narrow cp.async; 2-byte: align1 (configs/gpu/h100.yaml)."""
    s = load("gpu/h100").units[0].spec
    assert gemm_kernel_class(s, 4096, 4096, 16, 16).name == "tma"
    narrow = gemm_kernel_class(s, 4096, 4100, 16, 16)
    assert (narrow.name, narrow.rate_fraction) == ("narrow", s.tensor_core.unaligned_rate_fraction)
    a1 = gemm_kernel_class(s, 50257, 768, 16, 16)
    assert (a1.name, a1.tma) == ("align1", False)
    assert a1.rate_fraction == s.tensor_core.align1_rate_fraction
    # a convolution's channels are padded by the library: never worse than narrow
    assert gemm_kernel_class(s, 64, 147, 16, 16, padded=True).name == "narrow"


def test_align1_fitted_on_lm_heads_checked_on_other_unaligned_rows() -> None:
    """tensor_core.align1_rate_fraction was fitted on the 2048 x 50257 LM heads
    (h100_2026-11-26_shapes.jsonl, -2.8 % / +0.4 %); the check rows are another batch of
    the vocabulary head (8192 x 50257 x 768, h100_2026-11-26.jsonl: -2.5 %) and an odd N of
    another family (4096 x 4095 x 4096, h100_2026-11-26.jsonl: +8.0 %). Tolerance: 5 % fit,
    10 % check (run-to-run spread 1.5 %, one constant for a kernel class)."""
    u = load("gpu/h100").units[0]
    fit = [d for d in _gemm_rows("h100_2026-11-26_shapes.jsonl") if d["n"] == 50257]
    check = [d for d in _gemm_rows("h100_2026-11-26.jsonl") + _gemm_rows("h100_heldout.jsonl")
             if d["n"] in (50257, 4095)]
    assert len(fit) == 2 and len(check) == 2
    for d in fit:
        assert silicon.predict_ms(u, d) == pytest.approx(d["ms"], rel=0.05)
    for d in check:
        assert silicon.predict_ms(u, d) == pytest.approx(d["ms"], rel=0.10)


def test_narrow_class_gap_is_recorded() -> None:
    """The one 4/8-byte aligned row (4096 x 4096 x 4100, h100_2026-11-26.jsonl, 0.536 ms) is
    predicted ~42 % fast by the unfitted unaligned_rate_fraction 0.5 (docs/gpu.md gap);
    this pins the gap's sign and size, so a fix shows up here."""
    u = load("gpu/h100").units[0]
    (d,) = [d for d in _gemm_rows("h100_2026-11-26.jsonl") if d["k"] == 4100]
    err = silicon.predict_ms(u, d) / d["ms"] - 1
    assert -0.5 < err < -0.3


def test_swap_ab_runs_the_transposed_gemm_with_the_gemms_own_alignment() -> None:
    """mapping swap_ab: an m x n x k GEMM runs as n x m x k (C^T = W X^T) with the tile in
    that orientation; its kernel class is still judged on the GEMM's own rows (n = 4096, k =
    7168: 16-byte rows, tma), not on the m = 1 tokens of the transposed output (a GEMM
    whose own n is 1 has 1-byte fp8 output rows: align1). One token over a 64 x 16 tile:
    4096 / 64 = 64 CTAs in one wave, bound by HBM: launch 5 us + (weights 4096 x 7168 B +
    x 7168 B + out 4096 B) / (3350 GB/s x 0.9) = 5 + 9.742 us (configs/gpu/h100.yaml)."""
    f8 = FORMATS["fp8_e4m3"]
    u = load("gpu/h100").units[0]
    op = Gemm(name="g", m=1, n=4096, k=7168, a_format=f8, w_format=f8)
    e = u.estimate(op, {"tile": [64, 16, 256], "split_k": 1, "swap_ab": True})
    assert (e.details["bm"], e.details["bn"], e.details["waves"]) == (64, 16, 1)
    assert e.dram_read_bytes == pytest.approx(4096 * 7168 + 7168, rel=1e-9)
    hbm = (4096 * 7168 + 7168 + 4096) / (3350e9 * 0.9)
    assert e.latency_s == pytest.approx(5e-6 + hbm, rel=1e-3)
    assert e.bound == "memory"
    with pytest.raises(MappingError, match="mapping.swap_ab"):
        u.estimate(op, {"swap_ab": "yes"})


@pytest.mark.parametrize(("m", "n", "k"), [(129, 4096, 4096), (1, 4096, 4096), (257, 1000, 512)])
def test_padding_mmas_carry_no_energy(m: int, n: int, k: int) -> None:
    """A ragged tile's rows beyond M and columns beyond N are loaded as zeros (TMA
    out-of-bounds fill, cp.async zero-fill): their MMAs take time but toggle nothing. The
    tensor-core MAC energy count is therefore the useful m x n x k (K a multiple of the
    k-step), whatever tile is chosen, although the chosen tile pads (gpu/a100: no power
    model, so the counts come back unweighted)."""
    u = load("gpu/a100").units[0]
    e = u.estimate(Gemm(name="g", m=m, n=n, k=k, a_format=BF16, w_format=BF16))
    bm, bn = e.details["bm"], e.details["bn"]
    issued = -(-m // bm) * bm * -(-n // bn) * bn * k
    assert issued > m * n * k                          # the tile does pad
    assert e.actions[("gpu.tensor_core_bf16", "mac")] == pytest.approx(m * n * k, rel=1e-12)


def test_a_cta_that_follows_another_pays_its_store_drain_and_pipeline_fill() -> None:
    """One CTA per SM at a time (gpu/a100, tile 128 x 256 with 64-byte k-rows: four stages
    of 24 KiB, so one CTA fits the 164 KiB of shared memory): 1536 x 2304 is 12 x 9 = 108
    tiles, one per SM; 3072 x 2304 is two per SM. Per SM: one CTA = k-loop + epilogue +
    fill; two = 2 k-loops + 2 epilogues + fill + the switch (TILE_SWITCH_ROUND_TRIPS DRAM
    latencies: the first CTA's store drain, the second's pipeline fill). So the second
    SM time minus twice the first is (2 - 1) x 500 ns (configs/gpu/a100.yaml
    dram_latency_ns), whatever the k-loop."""
    u = load("gpu/a100").units[0]
    assert TILE_SWITCH_ROUND_TRIPS == 2
    mapping = {"tile": [128, 256, 64], "split_k": 1}
    one, two = (u.estimate(Gemm(name="g", m=m, n=2304, k=8192, a_format=BF16, w_format=BF16),
                           mapping).details for m in (1536, 3072))
    assert (one["ctas_per_sm"], two["ctas_per_sm"], one["waves"], two["waves"]) == (1, 1, 1, 2)
    assert two["sm_s"] - 2 * one["sm_s"] == pytest.approx((2 - 1) * 500e-9, rel=1e-6)


# ---------------------------------------------------------------- runtime protocol


def test_back_to_back_runtime_pays_launch_b2b_not_isolated_launch() -> None:
    """A kernel queued behind another (cuda_graph / eager) pays launch_b2b_us; launched alone
    (ideal, the event-timed do_bench protocol) launch_overhead_us. The device time of one
    small GEMM differs by exactly 5 - 1.94 = 3.06 us (configs/gpu/h100.yaml)."""
    op = Gemm(name="g", m=1, n=32, k=32, a_format=BF16, w_format=BF16)
    ideal = load("gpu/h100").units[0]
    graph = load("gpu/h100", ["units[0].runtime=cuda_graph"]).units[0]
    eager = load("gpu/h100", ["units[0].runtime=eager"]).units[0]
    d = ideal.estimate(op).latency_s - graph.estimate(op).latency_s
    assert d == pytest.approx((5.0 - 1.94) * 1e-6, abs=2e-9)   # one cycle of rounding
    assert eager.estimate(op).latency_s == graph.estimate(op).latency_s


def test_tiny_gemm_floor_reproduces_both_protocols() -> None:
    """One set of constants: a 1 x 32 x 32 bf16 GEMM costs 2.6 us back to back
    (kernels_h100/gemm.csv.gz) and ~5-6 us alone; the model: launch + fill + a tiny body."""
    op = Gemm(name="g", m=1, n=32, k=32, a_format=BF16, w_format=BF16)
    graph = load("gpu/h100", ["units[0].runtime=cuda_graph"]).units[0]
    ideal = load("gpu/h100").units[0]
    assert graph.estimate(op).latency_s == pytest.approx(2.6e-6, rel=0.10)
    assert 5e-6 < ideal.estimate(op).latency_s < 6.5e-6


def test_launch_b2b_defaults_to_the_isolated_launch() -> None:
    """A config without launch_b2b_us (T4, V100) keeps one launch cost for every runtime
    (gpu/a100 carries the H100's: tests/gpu/test_carry_kernels.py)."""
    op = Gemm(name="g", m=64, n=64, k=64, a_format=BF16, w_format=BF16)
    a = load("gpu/t4").units[0]
    g = load("gpu/t4", ["units[0].runtime=cuda_graph"]).units[0]
    assert a.spec.launch_b2b_us is None
    assert a.estimate(op).latency_s == g.estimate(op).latency_s


# ---------------------------------------------------------------- kernel tables


@needs_tables
def test_kernel_table_loader_reads_both_tables() -> None:
    rows = load_kernel_rows(KERNELS / "gemm.csv.gz")
    assert len(rows) == 71484                       # 35,742 bf16 + 35,742 fp8 rows
    first = rows[0][1]
    assert (first["kind"], first["dtype"], first["m"], first["n"], first["k"]) == \
        ("gemm", "bf16", 1, 32, 32)
    assert all(d["quant"] == (d["dtype"] == "fp8") for _, d in rows)
    assert kernel_class(first) == "vllm_gemm_small_m"
    q = load_kernel_rows(KERNELS / "fp8_quantize.csv.gz")
    assert q[0][1]["kind"] == "fp8_quant_delta" and len(q) == 1628


def test_kernel_table_bad_header_and_value_name_file_line(tmp_path: Path) -> None:
    bad = tmp_path / "t.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError, match=r"t.csv:1.*expected the columns"):
        load_kernel_rows(bad)
    bad2 = tmp_path / "g.csv.gz"
    bad2.write_bytes(gzip.compress(b"dtype,kernel,m,n,k,ms\nbfloat16,x,1,32,z,0.1\n"))
    with pytest.raises(ConfigError, match=r"g.csv.gz:2"):
        load_kernel_rows(bad2)


#: Every 37th row of each half (deterministic): ~960 rows per half, seconds to score.
_STRIDE = 37
#: Check-half median |error| per class reached by the model (docs/gpu.md, docs/validation.md).
#: The issue's target is 8 %; reached: bf16 7.6 %, fp8 7.7 %, small M 7.6 % (every 37th
#: row; bf16 was 8.4 % before the padding MMAs lost their energy and 8.2 % before a CTA
#: that follows another on its SM paid its store drain and pipeline fill, which moved fp8
#: from 7.3 %); the bounds are those values with margin for numeric drift, so an
#: improvement passes and a regression fails.
_CHECK_MEDIAN = {"vllm_gemm_bf16": 0.078, "vllm_gemm_fp8": 0.079, "vllm_gemm_small_m": 0.078}


@needs_tables
def test_kernels_h100_gemm_check_half_per_class() -> None:
    """Per-class median |error| of back-to-back predictions on the check half (K not a power
    of two) of shared/reference/kernels_h100/gemm.csv.gz; launch_b2b_us was fitted on the
    other half (K a power of two)."""
    rows = silicon.load_rows(KERNELS / "gemm.csv.gz")[::_STRIDE]
    check = [r for r in rows if shape_half(r.data) == "check"]
    scores = silicon.score(load("gpu/h100").units[0], check)
    assert set(scores) == set(_CHECK_MEDIAN)
    for cls, sc in scores.items():
        assert len(sc.errors) > 250
        assert sc.median_abs <= _CHECK_MEDIAN[cls], (cls, sc.median_abs)


@needs_tables
def test_table_switching_activity_fitted_on_the_fit_half_checked_on_the_other() -> None:
    """kernel_tables.TABLE_SWITCHING_ACTIVITY (0.67) is where the fit half's power-capped,
    compute-bound GEMMs (m > 64, K a power of two) have a zero median signed error: 0.673 on
    every 11th row (1210 rows), 0.659 on every 37th; this sample (every 111th row, 115 rows)
    gives 0.648, hence the tolerance. On the same kind of rows of the check half the median
    signed error stays within 5 % (docs/gpu.md)."""
    rows = [r.data for r in silicon.load_rows(KERNELS / "gemm.csv.gz")[::111]]
    unit = back_to_back(load("gpu/h100").units[0])
    fit = fit_switching_activity(unit, rows)
    assert fit is not None and fit[1] > 80
    assert fit[0] == pytest.approx(TABLE_SWITCHING_ACTIVITY, abs=0.05)
    errs = []
    for d in rows:
        if shape_half(d) != "check" or kernel_class(d) == "vllm_gemm_small_m":
            continue
        e = gemm_row_estimate(unit.with_switching_activity(1.0), d)
        if e.details.get("power_capped") and e.bound in ("compute", "feed"):
            p = predict_b2b_ms(unit, d)
            assert p is not None
            errs.append(p / d["ms"] - 1)
    assert len(errs) > 80
    errs.sort()
    assert abs(errs[len(errs) // 2]) < 0.05


@needs_tables
def test_tile_switch_round_trips_picked_by_the_fit_half(monkeypatch: pytest.MonkeyPatch) -> None:
    """TILE_SWITCH_ROUND_TRIPS is the mechanism's count (store drain + pipeline fill = 2);
    the fit half of kernels_h100/gemm.csv.gz (K a power of two; every 111th row, the table's
    switching activity refitted for each count) agrees: bf16 + fp8 median |error| is lowest
    at 2 of 1, 2, 3 (14.9 % against 18.8 and 16.6 %; every 37th row: 16.2 against 19.0 and
    18.1 %, docs/gpu.md). The check half is scored by
    test_kernels_h100_gemm_check_half_per_class."""
    rows = [r.data for r in silicon.load_rows(KERNELS / "gemm.csv.gz")[::111]]
    fit_rows = [d for d in rows if shape_half(d) == "fit"
                and kernel_class(d) in ("vllm_gemm_bf16", "vllm_gemm_fp8")]
    total = {}
    for trips in (1, 2, 3):
        monkeypatch.setattr(gemm_mod, "TILE_SWITCH_ROUND_TRIPS", trips)
        unit = back_to_back(load("gpu/h100").units[0])
        fit = fit_switching_activity(unit, rows)
        assert fit is not None
        monkeypatch.setattr(kernel_tables, "TABLE_SWITCHING_ACTIVITY", fit[0])
        errs: dict[str, list[float]] = {}
        for d in fit_rows:
            p = predict_b2b_ms(unit, d)
            assert p is not None
            errs.setdefault(kernel_class(d), []).append(abs(p / d["ms"] - 1))
        total[trips] = sum(sorted(v)[len(v) // 2] for v in errs.values())
    assert min(total, key=total.__getitem__) == 2, total


@needs_tables
def test_calibrate_reads_a_kernel_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """``archsim calibrate`` on the CSV: refits launch_b2b_us and the quantisation kernel's
    constants on the fit half (the values in configs/gpu/h100.yaml: 1.94, 0.403, 0.528,
    1.443 us)
    and reports both halves per class. launch_b2b_us refits to 1.90 since the tiny rows' split-K
    kernels pay their reduction kernel and small grids lost stream-K (docs/gpu.md "GEMM kernel
    choice"); the config keeps 1.94 (every constant fitted after it was fitted with it), so
    the tolerance is 0.05 us."""
    monkeypatch.setattr(cal_mod, "KERNEL_TABLE_STRIDE", 400)   # a short report
    cal = cal_mod.calibrate(KERNELS / "gemm.csv.gz", "gpu/h100")
    assert cal.values["launch_b2b_us"] == pytest.approx(1.94, abs=0.05)
    assert cal.values["quant_row_us"] == pytest.approx(0.403, abs=0.002)
    # calibrate fits quant_call_us after applying its own launch_b2b_us (1.90): +0.04 us
    assert cal.values["quant_call_us"] == pytest.approx(1.443, abs=0.05)
    assert cal.values["quant_chunk_us"] == pytest.approx(0.528, abs=0.002)
    text = "\n".join(cal.report)
    assert "check half" in text and "vllm_gemm_bf16" in text


def test_runtime_flag_on_gemm_run_and_serve(capsys: pytest.CaptureFixture[str]) -> None:
    """``--runtime X`` is ``--set units[0].runtime=X`` on run / gemm / map / plan / serve; a
    1 x 32 x 32 GEMM: 5 + 0.6 + body us alone, 1.94 + 0.6 + body back to back (2.6 us
    measured, kernels_h100/gemm.csv.gz)."""
    args = ["gemm", "gpu/h100", "--m", "1", "--n", "32", "--k", "32", "--a-format", "bf16",
            "--json"]
    assert main(args) == 0
    alone = json.loads(capsys.readouterr().out)["latency_s"]
    assert main([*args, "--runtime", "cuda_graph"]) == 0
    b2b = json.loads(capsys.readouterr().out)["latency_s"]
    assert alone - b2b == pytest.approx((5.0 - 1.94) * 1e-6, abs=2e-9)
    assert b2b == pytest.approx(2.6e-6, rel=0.10)
    assert main(["run", "gpu/h100", "--model", "gpt2-small", "--phase", "decode", "--batch",
                 "1", "--context", "128", "--runtime", "eager_hf"]) == 0
    assert "runtime eager_hf" in capsys.readouterr().out


def test_runtime_flag_rejects_an_unknown_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["gemm", "gpu/h100", "--m", "8", "--runtime", "warp"])
    assert exc.value.code == 2
    assert "--runtime" in capsys.readouterr().err


def test_row_quant_closed_form() -> None:
    """vLLM's per-token quantisation, one CTA per row (configs/gpu/h100.yaml): 32768 x 4096
    bf16 -> fp8: ceil(32768 / 132) = 249 rows per SM x (0.403 + 2 chunks x 0.528) us =
    363.3 us of SM time vs 32768 x (4096 x 3 + 4) B / (3350 GB/s x 0.9) = 133.5 us of HBM:
    SM-bound, plus the kernel's fixed cost back to back (quant_call_us 1.443 us); launched
    alone (runtime ideal) the fixed cost is 5 - 1.94 us more."""
    u = load("gpu/h100", ["units[0].runtime=cuda_graph"]).units[0]
    t = row_quant_s(u.spec, 32768, 4096, 2.0, 1.0)
    assert t == pytest.approx((249 * (0.403 + 2 * 0.528) + 1.443) * 1e-6, rel=1e-9)
    # a long row with few rows is HBM-bound: 132 x 65536 rows, one per SM
    hbm = 132 * (65536 * 3 + 4) / (3350e9 * 0.9)
    assert row_quant_s(u.spec, 132, 65536, 2.0, 1.0) == pytest.approx(
        max(hbm, (0.403 + 32 * 0.528) * 1e-6) + 1.443e-6, rel=1e-9)
    alone = load("gpu/h100").units[0]
    assert row_quant_s(alone.spec, 32768, 4096, 2.0, 1.0) - t == pytest.approx(
        (5.0 - 1.94) * 1e-6, rel=1e-9)
    # without quant_call_us the kernel pays launch + DRAM latency like any kernel
    plain = load("gpu/h100", ["units[0].runtime=cuda_graph",
                              "units[0].quant_call_us=null"]).units[0]
    assert row_quant_s(plain.spec, 32768, 4096, 2.0, 1.0) - t == pytest.approx(
        (1.94 + 0.6 - 1.443) * 1e-6, rel=1e-9)


@needs_tables
def test_quant_call_fitted_on_tiny_fit_rows_checked_on_tiny_check_rows() -> None:
    """quant_call_us (1.443 us) is the median over the 456 tiny fp8 rows (m*n*k <= 2^18) of
    the fit half of measured - scaled-mm - row time (kernels_h100/gemm.csv.gz). Check: the 39
    tiny fp8 rows of the check half are predicted within 5.0 % (median |error|; median signed
    +2.8 %), against +22.9 % when the kernel pays a GEMM's launch + DRAM latency (2.54 us)."""
    rows = [r.data for r in silicon.load_rows(KERNELS / "gemm.csv.gz")]
    fit = fit_quant_call_us(back_to_back(load("gpu/h100").units[0]), rows)
    assert fit is not None and fit[1] == 456
    assert fit[0] == pytest.approx(1.443, abs=0.01)
    tiny = [d for d in rows if d["dtype"] == "fp8" and shape_half(d) == "check"
            and d["m"] * d["n"] * d["k"] <= 2**18]
    assert len(tiny) == 39

    def median_abs(overrides: list[str]) -> float:
        u = back_to_back(load("gpu/h100", overrides).units[0])
        errs = sorted(abs(float(predict_b2b_ms(u, d) or 0.0) / d["ms"] - 1) for d in tiny)
        return errs[len(errs) // 2]

    assert median_abs([]) < 0.06
    assert median_abs(["units[0].quant_call_us=null"]) > 0.20
