"""Issue 26 item 3, FA4: FlashAttention's CuTe-DSL kernel (``paged_attention.kernel: fa4``) as
vLLM 0.24 calls it through the paged-KV backend. Fitted on the FA4 rows of
shared/reference/kernels_h100/attention_{context,generation}.csv.gz (tables
attention/vllm/0.24.0, ``vllm_flash_attn_fa4``: head_dim 512 on H100; README there: H100
only), split by GQA shape family (1, 4, 16 query heads fit; 2 and 8 check); carried to
gpu/b200 and gpu/gb200 by mechanism (docs/gpu.md "FlashAttention-4")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from archsim import silicon
from archsim.api import load
from archsim.arch.gpu.paged_attention import (
    fa3_cta_work,
    fa4_decode_tiles_s,
    fa4_prefill_splits,
    fa4_tile,
    paged_attention_parts,
    paged_attention_time,
    paged_constants,
)
from archsim.kernel_tables import (
    attention_op,
    back_to_back,
    kernel_class,
    predict_b2b_ms,
    shape_half,
)
from archsim.workloads.errors import ConfigError, WorkloadError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Attention
from tests.gpu.gpu_helpers import SHARED_REF, assert_class_medians

KERNELS = SHARED_REF / "kernels_h100"
needs_tables = pytest.mark.skipif(not KERNELS.exists(), reason="../shared/ not present")
BF16, FP8 = FORMATS["bf16"], FORMATS["fp8_e4m3"]


def _row(kind: str, **kw: object) -> dict:
    d = {"kind": kind, "b": 1, "isl": 1, "step": 0, "h": 8, "kv": 1, "d": 512, "window": 0,
         "ms": 1.0, "protocol": "b2b", "dtype": "bf16", "kv_dtype": "bf16", "fa": "fa4"}
    d.update(kw)
    return d


# ---------------------------------------------------------------- tiles and constants

def test_fa4_tiles_hopper_and_blackwell() -> None:
    # Hopper: FA4's retuned FA3 table (flash_attn/cute/interface.py _tile_size_fwd_sm90)
    assert fa4_tile(64, 0, True, False) == (192, 128, True)
    assert fa4_tile(96, 0, False, False) == (192, 144, True)
    assert fa4_tile(128, 0, True, False) == (128, 128, True)
    assert fa4_tile(192, 128, True, False) == (128, 96, True)
    assert fa4_tile(256, 0, True, False) == (128, 80, True)
    # head_dim 512: 64 rows x 512 fp32 of O over two warpgroups = 128 registers a thread
    assert fa4_tile(512, 0, True, False) == (64, 64, True)
    # Blackwell: 128 x 128 per Q stage, two stages once the packed rows exceed 128
    assert fa4_tile(128, 0, True, True, rows=128) == (128, 128, True)
    assert fa4_tile(128, 0, True, True, rows=129) == (256, 128, True)


def test_paged_constants_pick_the_generation() -> None:
    h100 = load("gpu/h100").units[0].spec
    assert paged_constants(h100).kernel == "fa3"
    assert paged_constants(h100, "fa3") is h100.paged_attention
    assert paged_constants(h100, "fa4") is h100.paged_attention_fa4
    assert h100.paged_attention_fa4.kernel == "fa4"
    a100 = load("gpu/a100").units[0].spec
    assert paged_constants(a100, "fa4") is None
    b200 = load("gpu/b200").units[0].spec
    assert b200.paged_attention.kernel == "fa4"
    assert paged_constants(b200, "fa4") is b200.paged_attention
    # an FA3-labelled row is priced with the generation the GPU runs (FA4 on Blackwell)
    assert paged_constants(b200, "fa3") is b200.paged_attention


def test_fa4_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"paged_attention_fa4\.kernel"):
        load("gpu/h100", ["units[0].paged_attention_fa4.kernel=fa3"])
    with pytest.raises(ConfigError, match=r"mma_efficiency_fp8"):
        load("gpu/b200", ["units[0].paged_attention.mma_efficiency_fp8=0.5"])


# ---------------------------------------------------------------- closed forms

def test_fa4_decode_tiles_closed_form() -> None:
    """Up to serial_max_batch sequences the tiles run one after another, each one
    decode_tile_us plus decode_tile_pair_ns per tile before it; above, in parallel, each
    scanning batch / 62 steps of 31 sequences on average, over the SMs."""
    s = load("gpu/h100").units[0].spec
    c = s.paged_attention_fa4
    # 64 sequences x 2 KV heads = 128 tiles: 128 x tile + 128 x 127 / 2 x pair
    want = 128 * c.decode_tile_us * 1e-6 + 128 * 127 / 2 * c.decode_tile_pair_ns * 1e-9
    assert fa4_decode_tiles_s(c, 64, 128, 132) == pytest.approx(want, rel=1e-12)
    # 1024 sequences, one KV head each: 1024 tiles x 1024 / 62 steps x step / 132 SMs
    assert fa4_decode_tiles_s(c, 1024, 1024, 132) == pytest.approx(
        1024 * 1024 / 62 * c.scan_step_us * 1e-6 / 132, rel=1e-12)
    # Blackwell carries no serial regime: the scan at every batch
    b = load("gpu/b200").units[0].spec.paged_attention
    assert b.decode_tile_us == 0 and b.scan_step_us == c.scan_step_us
    assert fa4_decode_tiles_s(b, 8, 64, 148) == pytest.approx(
        64 * 8 / 62 * b.scan_step_us * 1e-6 / 148, rel=1e-12)


def test_fa4_decode_call_closed_form() -> None:
    """One sequence, 64k keys, one KV head of 512: call + max(tiles, stream at one
    sequence's rate), the stream 2 x 65536 x 512 x 2 B."""
    s = load("gpu/h100").units[0].spec
    c = s.paged_attention_fa4
    op = Attention(name="a", batch=1, heads=8, kv_heads=1, q_len=1, kv_len=65536,
                   head_dim=512, a_format=BF16, w_format=BF16)
    stream = 2 * 65536 * 512 * 2 / (min(s.memory.sustained_bytes_per_s,
                                        c.seq_stream_gbps * 1e9))
    want = c.decode_call_us * 1e-6 + max(c.decode_tile_us * 1e-6, stream)
    assert paged_attention_time(s, op, "fa4") == pytest.approx(want, rel=1e-12)


def _h100_fa4_pair_and_cta() -> tuple[float, float]:
    """gpu/h100's FA4 per-pair time at head_dim 512 (2 x 512 / (bf16 MMA rate per SM x
    eff) + one exp, seconds) and one 64-row CTA's fixed time (cta_us + 64 x 512 x
    cta_tile_ns)."""
    s = load("gpu/h100").units[0].spec
    c = s.paged_attention_fa4
    f = s.tensor_clock_mhz * 1e6
    pair = 2 * 512 / (s.tc_rate_per_sm("bf16") * c.mma_efficiency * f) \
        + 1 / (s.cuda_core.sfu_per_sm * f)
    return pair, c.cta_us * 1e-6 + 64 * 512 * c.cta_tile_ns * 1e-9


def test_fa4_prefill_pairs_closed_form() -> None:
    """One sequence of 16384 causal tokens, 8 query heads over one KV head, head_dim 512 (far
    more 64-row CTAs than SMs): the SM time is the sum over the CTAs of cta + work x pair
    over the SMs; the pair = 2 x 512 / (bf16 MMA rate per SM x eff) + one exp."""
    s = load("gpu/h100").units[0].spec
    op = Attention(name="a", batch=1, heads=8, kv_heads=1, q_len=16384, kv_len=16384,
                   head_dim=512, causal=True, a_format=BF16, w_format=BF16)
    t = paged_attention_parts(s, op, "fa4")
    pair, cta = _h100_fa4_pair_and_cta()
    # packed rows 16384 x 8 in 2048 CTAs of 64: CTA j (rows 64j..64j+63, queries 8j..8j+7)
    # visits key tiles 0..floor((8j+7)/64): (floor((8j+7)/64) + 1) x 64 keys x 64 rows
    work = sum(64 * 64 * ((8 * j + 7) // 64 + 1) for j in range(2048))
    assert t.sm_s == pytest.approx((2048 * cta + work * pair) / s.sm_count, rel=1e-12)


def test_blackwell_fa4_overlaps_the_exp() -> None:
    """On gpu/b200 the exp runs beside the tcgen05 MMAs: per pair max(MMA, exp)."""
    s = load("gpu/b200").units[0].spec
    c = s.paged_attention
    assert c.softmax_overlap
    f = s.tensor_clock_mhz * 1e6
    op = Attention(name="a", batch=1, heads=32, kv_heads=8, q_len=8192, kv_len=8192,
                   head_dim=128, causal=False, a_format=BF16, w_format=BF16)
    t = paged_attention_parts(s, op)
    pair = max(2 * 128 / (s.tc_rate_per_sm("bf16") * c.mma_efficiency * f),
               1 / (s.cuda_core.sfu_per_sm * f))
    assert t.pair_cycles == pytest.approx(pair * f, rel=1e-12)


def test_fa4_refuses_an_fp8_kv_cache() -> None:
    s = load("gpu/b200").units[0].spec
    op = Attention(name="a", batch=1, heads=8, kv_heads=1, q_len=1, kv_len=128, head_dim=128,
                   kv_format=FP8, a_format=BF16, w_format=BF16)
    with pytest.raises(WorkloadError, match="FlashAttention-4"):
        paged_attention_parts(s, op)


def test_fa4_rows_without_fa4_constants_have_no_prediction() -> None:
    row = _row("attn_generation", step=15)
    assert kernel_class(row) == "vllm_attn_decode_fa4"
    assert predict_b2b_ms(back_to_back(load("gpu/a100").units[0]), row) is None
    h100 = back_to_back(load("gpu/h100").units[0])
    assert predict_b2b_ms(h100, row) == pytest.approx(
        paged_attention_time(h100.spec, attention_op(row), "fa4") * 1e3, rel=1e-12)


def test_fa4_rows_split_by_gqa_family() -> None:
    assert [shape_half(_row("attn_context", isl=16, h=h, kv=1)) for h in (1, 2, 4, 8)] \
        == ["fit", "check", "fit", "check"]
    assert shape_half(_row("attn_context", isl=16, h=16, kv=2)) == "fit"


# ---------------------------------------------------------------- the tables

#: Median |error| per class on both halves reached by the model fitted on the 1/4/16-head
#: rows (docs/gpu.md "FlashAttention-4": check 4.2 % prefill, 6.5 % decode; fit 4.5 % /
#: 5.4 %): limits with margin, so a regression fails.
_CHECK_MEDIAN = {"vllm_attn_prefill_fa4": 0.055, "vllm_attn_decode_fa4": 0.075}
_FIT_MEDIAN = {"vllm_attn_prefill_fa4": 0.055, "vllm_attn_decode_fa4": 0.065}


@needs_tables
@pytest.mark.parametrize("table", ["attention_context", "attention_generation"])
def test_kernels_h100_fa4_per_class_both_halves(table: str) -> None:
    """Back-to-back predictions of every FA4 row of shared/reference/kernels_h100/
    {table}.csv.gz (578 prefill, 800 decode) on gpu/h100's paged_attention_fa4: median
    |error| per class on the check half (2 and 8 query heads, not fitted) and the fit half.
    The one-token prefill rows run the decode path (q_len 1) but score as prefill."""
    rows = [r for r in silicon.load_rows(KERNELS / f"{table}.csv.gz")
            if r.data.get("fa") == "fa4"]
    assert len(rows) == (578 if table == "attention_context" else 800)
    assert_class_medians(load("gpu/h100").units[0], rows,
                         {"check": _CHECK_MEDIAN, "fit": _FIT_MEDIAN}, 200)


def test_h100_fa3_prediction_is_untouched_by_fa4_constants() -> None:
    """gpu/h100's own calls stay FA3: removing the FA4 section changes nothing."""
    s = load("gpu/h100").units[0].spec
    bare = replace(s, paged_attention_fa4=None)
    op = Attention(name="a", batch=4, heads=32, kv_heads=8, q_len=2048, kv_len=2048,
                   head_dim=128, causal=True, a_format=BF16, w_format=BF16)
    assert paged_attention_time(s, op) == paged_attention_time(bare, op)


def _reference_shape_tflops(spec, kernel_time: bool = True) -> float:
    """bf16 forward TFLOP/s at the FlashAttention papers' reference shape (head_dim 128,
    non-causal, 16k tokens x 16 heads), kernel time max(SM, HBM) (no backend call)."""
    op = Attention(name="a", batch=1, heads=16, kv_heads=16, q_len=16384, kv_len=16384,
                   head_dim=128, causal=False, a_format=BF16, w_format=BF16)
    t = paged_attention_parts(spec, op)
    return 4 * 16384 * 16384 * 16 * 128 / max(t.sm_s, t.hbm_s) / 1e12


@pytest.mark.parametrize("gpu", ["b200", "gb200"])
def test_blackwell_fa4_efficiency_is_carried_and_checked_on_the_papers_peak(gpu: str) -> None:
    """No Blackwell figure sets gpu/b200's FA4 constants (issue 26 item 7): its
    ``mma_efficiency`` is the fraction of the dense bf16 rate (at the tensor clock) the H100
    model of FA3 reaches at the reference shape. The FA4 paper (Zadouri et al., arXiv,
    abstract: up to 1613 TFLOP/s bf16 forward on B200) is then a check: within 10 %."""
    h100 = load("gpu/h100").units[0].spec
    peak = float(h100.tc_rate_per_sm("bf16")) * h100.sm_count * h100.tensor_clock_mhz * 2e-6
    frac = _reference_shape_tflops(h100) / peak
    s = load(f"gpu/{gpu}").units[0].spec
    assert s.paged_attention.mma_efficiency == pytest.approx(frac, abs=0.001)
    assert _reference_shape_tflops(s) == pytest.approx(1613, rel=0.10)


def test_h200_carries_fa4_by_the_hbm_rate_only() -> None:
    """gpu/h200 (same GH100 die) carries paged_attention_fa4 whole: a long-context decode
    call is faster by at most the HBM ratio (4.8 / 3.35 TB/s), a compute-bound prefill and
    a tile-bound short decode are unchanged."""
    h100 = load("gpu/h100").units[0].spec
    h200 = load("gpu/h200").units[0].spec
    assert h200.paged_attention_fa4 == h100.paged_attention_fa4

    def ratio(**kw: int | bool) -> float:
        op = Attention(name="a", heads=8, kv_heads=1, head_dim=512, a_format=BF16,
                       w_format=BF16, **kw)  # type: ignore[arg-type]
        return paged_attention_time(h100, op, "fa4") / paged_attention_time(h200, op, "fa4")

    hbm = h200.memory.sustained_bytes_per_s / h100.memory.sustained_bytes_per_s
    assert 1.3 < ratio(batch=8, q_len=1, kv_len=65536) <= hbm
    assert ratio(batch=1, q_len=16384, kv_len=16384, causal=True) == pytest.approx(1.0)
    assert ratio(batch=64, q_len=1, kv_len=16) == pytest.approx(1.0)


def test_fa4_prefill_splits_the_key_axis_for_few_ctas() -> None:
    """One sequence of 2048 causal tokens, one query head of 512: 2048 / 64 = 32 CTAs on 132
    SMs and 32 key blocks of 64, so FA4 splits the key axis min(132 // 32, 128, 32) = 4
    ways: every split pays the CTA cost, the longest CTA's work is shared by 4, and the fp32
    partials (4 x 2048 x 512 x 4 B) are written and read back."""
    assert fa4_prefill_splits(32, 32, 132) == 4
    assert fa4_prefill_splits(2048, 256, 132) == 1       # CTAs fill the SMs
    assert fa4_prefill_splits(8, 4, 132) == 1            # 4 key blocks or fewer: no split
    s = load("gpu/h100").units[0].spec
    c = s.paged_attention_fa4
    op = Attention(name="a", batch=1, heads=1, kv_heads=1, q_len=2048, kv_len=2048,
                   head_dim=512, causal=True, a_format=BF16, w_format=BF16)
    t = paged_attention_parts(s, op, "fa4")
    pair, cta = _h100_fa4_pair_and_cta()
    n, total, largest = fa3_cta_work(2048, 2048, 1, 0, True, 64, 64)
    assert t.sm_s == pytest.approx(max((n * 4 * cta + total * pair) / 132,
                                       cta + largest / 4 * pair), rel=1e-12)
    tok = c.token_ns * 1e-9 + 2 * 512 * 2 / (c.cache_write_gbps * 1e9)
    partials = 2 * 4 * 2048 * 512 * 4 / s.memory.sustained_bytes_per_s
    assert t.fixed_s == pytest.approx(c.prefill_call_us * 1e-6 + 2048 * tok + partials,
                                      rel=1e-12)
