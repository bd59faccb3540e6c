"""Issue 26 item 3: FlashAttention as vLLM calls it (FA3 through the paged-KV backend) —
the Attention op's window and KV format, the tile-level causal / window work, the split-KV
decode floor and batch-proportional cost, and the fit on
shared/reference/kernels_h100/attention_{context,generation}.csv.gz (tables
attention/vllm/0.24.0; README there: H100 only)."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import pytest

import archsim.calibration as cal_mod
from archsim import silicon
from archsim.api import load
from archsim.arch.gpu.kernels import cta_pairs, unit_attention_time
from archsim.arch.gpu.paged_attention import fa3_cta_work, fa3_tile, paged_attention_time
from archsim.kernel_tables import attention_op, load_kernel_rows, shape_half
from archsim.workloads.errors import ConfigError, WorkloadError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Attention
from tests.gpu.gpu_helpers import SHARED_REF, assert_class_medians

KERNELS = SHARED_REF / "kernels_h100"
needs_tables = pytest.mark.skipif(not KERNELS.exists(), reason="../shared/ not present")
BF16, FP8 = FORMATS["bf16"], FORMATS["fp8_e4m3"]


def _attn(**kw: object) -> Attention:
    base = {"name": "a", "batch": 1, "heads": 1, "kv_heads": 1, "q_len": 1, "kv_len": 1,
            "head_dim": 128, "a_format": BF16, "w_format": BF16}
    base.update(kw)
    return Attention(**base)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the op's window / kv format

@pytest.mark.parametrize(("q", "kv", "w", "pairs"), [
    (5, 5, 0, 15),       # 1+2+3+4+5
    (5, 5, 2, 9),        # 1+2+2+2+2
    (2, 6, 3, 6),        # rows see 5 and 6 keys, capped at 3 each
    (4, 4, 10, 10),      # window longer than the sequence: full causal
])
def test_causal_window_pairs_counted_by_hand(q: int, kv: int, w: int, pairs: int) -> None:
    assert _attn(q_len=q, kv_len=kv, causal=True, window=w).pairs() == pairs


def test_window_and_fp8_kv_cache_shrink_decode_bytes() -> None:
    """Decode reads K and V of the keys it sees, at the KV format's bytes per element."""
    full = _attn(batch=4, heads=8, kv_heads=2, kv_len=4096)
    assert full.input_bytes() == pytest.approx((4 * 8 * 128 + 2 * 4 * 2 * 4096 * 128) * 2)
    f8 = replace(full, kv_format=FP8)
    assert f8.input_bytes() == pytest.approx(4 * 8 * 128 * 2 + 2 * 4 * 2 * 4096 * 128 * 1)
    assert replace(full, window=512).keys_seen() == 512
    with pytest.raises(WorkloadError, match="window"):
        _attn(window=-1)


def test_sdpa_model_unchanged_without_window_or_kv_format() -> None:
    """The SDPA attention path reads the same bytes when the new fields are at their defaults
    and fewer with an fp8 KV cache (K/V halve)."""
    s = load("gpu/h100").units[0].spec
    op = _attn(batch=2, heads=8, kv_heads=8, q_len=1, kv_len=8192)
    a, b = unit_attention_time(s, op), unit_attention_time(s, replace(op, kv_format=FP8))
    kv = 2 * 2 * 8 * 8192 * 128
    assert a.read_b - b.read_b == pytest.approx(kv * (2 - 1))


# ---------------------------------------------------------------- tile-level FA work

@pytest.mark.parametrize(("q", "kv", "w", "causal"), [
    (300, 300, 0, True), (300, 300, 100, True), (300, 900, 200, True), (5, 400, 130, True),
    (300, 500, 128, False), (1000, 1000, 4096, True)])
def test_cta_pairs_sum_to_the_ops_pairs_with_a_window(q: int, kv: int, w: int,
                                                        causal: bool) -> None:
    """The SDPA model's per-CTA work (imbalance, cycle lowering) counts the same pairs as
    Attention.pairs(), window included."""
    op = _attn(q_len=q, kv_len=kv, window=w, causal=causal)
    assert sum(cta_pairs(op)) == op.pairs()

def test_fa3_cta_work_causal_window_and_packed_gqa_by_tiles() -> None:
    """(CTAs, pairs, largest CTA) of one (sequence, KV head), counted in whole tiles by hand.
    128 x 128 tiles, one query head per KV head: causal 256 tokens = block 0 one tile, block 1
    two; a 128-key window touches at most two tiles per block. Packed GQA: 16 queries x 8
    heads are one 128-row block over one key tile; 256 queries x 2 heads in 192-row blocks
    over 128-key tiles (head_dim 64): rows 0-191 = queries 0-95 (one tile), 192-383 = 96-191
    (two), 384-511 = 192-255 (two, 128 rows)."""
    t = 128 * 128
    assert fa3_cta_work(256, 256, 1, 0, True, 128, 128) == (2, 3 * t, 2 * t)
    assert fa3_cta_work(512, 512, 1, 128, True, 128, 128) == (4, 7 * t, 2 * t)
    assert fa3_cta_work(16, 16, 8, 0, True, 128, 128) == (1, t, t)
    assert fa3_cta_work(256, 256, 2, 0, True, 192, 128) == \
        (3, 192 * 128 + 192 * 256 + 128 * 256, 192 * 256)
    # non-causal: every block sees every key tile (300 keys = 3 tiles of 128)
    assert fa3_cta_work(200, 300, 1, 0, False, 128, 128) == (2, 200 * 3 * 128, 3 * t)


def test_fa3_tile_table() -> None:
    """FA3's Hopper tiles with a paged KV cache loaded without TMA (hopper/tile_size.h):
    (block M, block N, intra-warpgroup overlap)."""
    assert fa3_tile(128, False, 0) == (128, 128, True)
    assert fa3_tile(64, False, 0) == (192, 128, True)
    assert fa3_tile(64, False, 128) == (192, 160, False)      # local: no overlap
    assert fa3_tile(192, False, 0) == (128, 96, True)
    assert fa3_tile(256, False, 1024) == (128, 64, True)
    assert fa3_tile(128, True, 0) == (128, 160, True)
    assert fa3_tile(256, True, 0) == (128, 128, False)        # paged fp8: no overlap


# ---------------------------------------------------------------- mechanism properties

def _spec():  # type: ignore[no-untyped-def]
    return load("gpu/h100").units[0].spec


def test_decode_floor_then_batch_proportional() -> None:
    """Below one wave of (sequence, KV head) CTAs decode costs its floor; past it the CTA
    term grows linearly with the batch: doubling a large batch at a short context nearly
    doubles the time above the call's fixed work."""
    s = _spec()
    c = s.paged_attention
    t = {b: paged_attention_time(s, _attn(batch=b, heads=8, kv_heads=8, kv_len=2))
         for b in (1, 2, 2048, 4096)}
    # one wave: one more sequence adds its seq_ns and its 8 CTAs' first min_keys K/V tiles
    tile_b = 8 * 2 * c.min_keys * 128 * 2
    assert t[2] - t[1] == pytest.approx(c.seq_ns * 1e-9 + tile_b / s.memory.sustained_bytes_per_s,
                                        rel=1e-6)
    body = {b: t[b] - c.decode_call_us * 1e-6 for b in (2048, 4096)}
    assert body[4096] / body[2048] == pytest.approx(2.0, rel=0.01)


def test_decode_long_context_streams_kv_at_hbm_rate_fp8_halves_it() -> None:
    s = _spec()
    op = _attn(batch=8, heads=32, kv_heads=8, kv_len=131072)
    kv = 2 * 8 * 8 * 131072 * 128
    bw = s.memory.sustained_bytes_per_s
    t16 = paged_attention_time(s, op)
    t8 = paged_attention_time(s, replace(op, kv_format=FP8))
    assert t16 == pytest.approx(kv * 2 / bw, rel=0.02)
    assert t16 - t8 == pytest.approx(kv / bw - s.paged_attention.fp8_call_us * 1e-6, rel=1e-6)


def test_prefill_long_sequence_is_mma_bound_and_gqa_only_moves_bytes() -> None:
    """At 16k causal tokens the MMAs set the time: MHA and GQA-8 differ only by the KV-cache
    write of 28 more KV heads per token."""
    s = _spec()
    c = s.paged_attention
    mha = _attn(heads=32, kv_heads=32, q_len=16384, kv_len=16384, causal=True)
    gqa = replace(mha, kv_heads=4)
    a, b = paged_attention_time(s, mha), paged_attention_time(s, gqa)
    assert a - b == pytest.approx(16384 * 2 * 28 * 128 * 2 / (c.cache_write_gbps * 1e9),
                                  rel=1e-6)
    assert b > paged_attention_time(s, replace(gqa, window=1024)) * 4


def test_prefill_causal_imbalance_one_wave_set_by_the_longest_cta() -> None:
    """One head of 4096 causal tokens (32 CTAs, fewer than the SMs): the last block's 32
    tiles and its CTA time set the time, not the mean (16.5 tiles)."""
    s = _spec()
    c = s.paged_attention
    op = _attn(q_len=4096, kv_len=4096, causal=True)
    f = s.tensor_clock_mhz * 1e6
    pair_s = 2 * 128 / (s.tc_rate_per_sm("bf16") * c.mma_efficiency * f) \
        + 1 / (s.cuda_core.sfu_per_sm * f)
    sm = c.cta_us * 1e-6 + 128 * 128 * c.cta_tile_ns * 1e-9 + 32 * 128 * 128 * pair_s
    fixed = (c.prefill_call_us * 1e-6 + 4096 * (c.token_ns * 1e-9 + 2 * 128 * 2
                                                 / (c.cache_write_gbps * 1e9)))
    assert paged_attention_time(s, op) == pytest.approx(fixed + sm, rel=1e-9)


def test_prefill_fp8_kv_runs_the_e4m3_kernel() -> None:
    """An fp8 KV cache runs FA3's e4m3 kernel: at 16k tokens (MMA-bound) the time per pair is
    2 x head_dim / (fp8 MMA rate x mma_efficiency_fp8) + one exp, and at head_dim 256 (paged
    fp8: no intra-warpgroup overlap) that times no_overlap_factor."""
    s = _spec()
    c = s.paged_attention
    f = s.tensor_clock_mhz * 1e6
    for d, factor in ((128, 1.0), (256, c.no_overlap_factor)):
        op = _attn(heads=32, kv_heads=8, q_len=16384, kv_len=16384, causal=True, head_dim=d,
                   kv_format=FP8)
        pair = (2 * d / (s.tc_rate_per_sm("fp8_e4m3") * c.mma_efficiency_fp8 * f)
                + 1 / (s.cuda_core.sfu_per_sm * f)) * factor
        bm, bn, _ = fa3_tile(d, True, 0)
        n, total, _ = fa3_cta_work(16384, 16384, 4, 0, True, bm, bn)
        cta = c.cta_us * 1e-6 + bm * d * c.cta_tile_ns * 1e-9
        sm = 8 * (n * cta + total * pair) / s.sm_count
        tok = (c.token_ns * 1e-9 + 2 * 8 * d / (c.cache_write_gbps * 1e9)) * c.fp8_token_factor
        fixed = (c.prefill_call_us + c.fp8_call_us) * 1e-6 + 16384 * tok
        assert paged_attention_time(s, op) == pytest.approx(fixed + sm, rel=1e-9)


# ---------------------------------------------------------------- the tables

def test_attention_table_loader_labels_fa4_and_skips_indivisible_gqa(tmp_path: Path) -> None:
    """FA4 rows are read with their label (their own constants and classes: test_fa4.py);
    rows whose KV heads do not divide the query heads are skipped."""
    head = ("kernel,batch_size,isl,step,num_heads,num_key_value_heads,head_dim,attn_dtype,"
            "kv_cache_dtype,window_size,ms\n")
    p = tmp_path / "attention_generation.csv.gz"
    p.write_bytes(gzip.compress((head
                                 + "vllm_flash_attn_fa3,2,1,15,8,2,64,bfloat16,fp8,128,0.011\n"
                                 + "vllm_flash_attn_fa4,2,1,15,8,2,64,bfloat16,fp8,0,0.011\n"
                                 + "vllm_flash_attn_fa3,2,1,15,5,2,64,bfloat16,fp8,0,0.011\n"
                                 ).encode()))
    rows = load_kernel_rows(p)
    assert [i for i, _ in rows] == [2, 3]
    assert "fa" not in rows[0][1] and rows[1][1]["fa"] == "fa4"
    op = attention_op(rows[0][1])
    assert (op.q_len, op.kv_len, op.window, op.kv_format) == (1, 16, 128, FP8)
    assert shape_half(rows[0][1]) == "fit"
    p.write_bytes(gzip.compress((head + "vllm_flash_attn_fa3,2,1,x,8,2,64,bfloat16,fp8,0,1\n"
                                 ).encode()))
    with pytest.raises(ConfigError, match=r"attention_generation.csv.gz:2"):
        load_kernel_rows(p)


#: Median |error| per class on the check half (head_dim 128 and 192) reached by the model
#: fitted on head_dim 64 and 256 (docs/gpu.md "FlashAttention as vLLM calls it"; measured
#: 7.9 % prefill, 7.7 % decode; fit half 9.2 % / 11.2 %): limits with margin, so a
#: regression fails.
_CHECK_MEDIAN = {"vllm_attn_prefill": 0.082, "vllm_attn_decode": 0.08}
_FIT_MEDIAN = {"vllm_attn_prefill": 0.095, "vllm_attn_decode": 0.115}
_STRIDE = 7


@needs_tables
@pytest.mark.parametrize("table", ["attention_context", "attention_generation"])
def test_kernels_h100_attention_per_class_both_halves(table: str) -> None:
    """Back-to-back predictions of every 7th FA3 row of shared/reference/kernels_h100/
    {table}.csv.gz: median |error| per class on the check half (head_dim 128 / 192, not
    fitted) and on the fit half (64 / 256)."""
    rows = [r for r in silicon.load_rows(KERNELS / f"{table}.csv.gz")
            if r.data.get("fa") != "fa4"][::_STRIDE]
    assert_class_medians(load("gpu/h100").units[0], rows,
                         {"check": _CHECK_MEDIAN, "fit": _FIT_MEDIAN}, 3000)


@needs_tables
def test_calibrate_reports_attention_classes_per_half(monkeypatch: pytest.MonkeyPatch) -> None:
    """``archsim calibrate`` on an attention table reports the class on both halves."""
    monkeypatch.setattr(cal_mod, "KERNEL_TABLE_STRIDE", 400)
    text = "\n".join(cal_mod.calibrate(KERNELS / "attention_generation.csv.gz",
                                       "gpu/h100").report)
    assert "check half" in text and "vllm_attn_decode" in text


def test_calibrate_cli_on_a_scored_only_table_writes_nothing(tmp_path, capsys,
                                                              monkeypatch: pytest.MonkeyPatch):
    """The attention tables are scored, not refitted, by ``archsim calibrate``: it prints the
    report, says no config is written, exits 0 and leaves no file behind."""
    from archsim.cli import main

    with gzip.open(KERNELS / "attention_generation.csv.gz", "rt") as fh:
        head = [next(fh) for _ in range(60)]
    small = tmp_path / "attention_generation.csv.gz"
    with gzip.open(small, "wt") as fh:
        fh.writelines(head)
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", str(small), "--config", "gpu/h100"]) == 0
    out = capsys.readouterr().out
    assert "vllm_attn_decode" in out and "no config written" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attention_generation.csv.gz"]
