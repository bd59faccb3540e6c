"""FlashAttention as a serving framework calls it: vLLM's FLASH_ATTN backend through a
paged KV cache (FA3 on Hopper, FA2 on Ampere, FA4 on Blackwell and for the head_dims FA3
lacks on Hopper), priced from ``GpuSpec.paged_attention`` (and ``paged_attention_fa4``),
fitted on kernels_h100's attention tables (docs/gpu.md "FlashAttention as vLLM calls it",
"FlashAttention-2 on Ampere", "FlashAttention-4"). The SDPA model (PyTorch's kernel, eager)
is ``arch.gpu.kernels``; :func:`estimate_attention` picks between them.

One framework call (``paged_attention_time``; FA2's tiles ``fa2_tile``, its main-loop
efficiency from the FlashAttention-2 paper) is several kernels (KV-cache write, attention,
split-KV combine), timed back to back::

    prefill: T = call + [fp8 KV: fp8_call]
                 + tokens x (token_ns + K,V bytes per token / cache_write) [x fp8_token_factor]
                 + max(t_sm, t_hbm)
             t_sm  = max(sum over CTAs of (cta + work x pair) / SMs, cta + largest work x pair)
             cta   = cta_us + block M x head_dim x cta_tile_ns       (Q load, O / LSE write)
             pair  = 2 head_dim / (MMA rate per SM x mma_efficiency[_fp8]) + 1 / SFU rate per SM
                     [x no_overlap_factor where FA3's tile runs without intra-warpgroup overlap]
             work  = FA3's tiles (fa3_tile: block M x block N by head_dim and format) over the
                     packed-GQA rows of one KV head (fa3_cta_work), diagonal and window-edge
                     tiles computed whole; fp8 KV: the e4m3 kernel at the fp8 MMA rate.
                     FA2 (paged_attention.kernel fa2): its split-KV kernel's 64 x N tiles
                     (fa2_tile) over the rows of one query head (no packed GQA in prefill);
                     no fp8 KV kernel (paged_kv_refusal)
    decode:  T = decode_call + [fp8_call] + batch x seq_ns
                 + max(1, batch x kv_heads / SMs) x (decode_cta_us + head_dim x cta_dim_ns)
                 + K,V bytes of max(keys seen, min_keys) / BW

FA4 (``paged_attention.kernel: fa4``; ``paged_constants``: a Blackwell GPU's own constants,
``paged_attention_fa4`` on Hopper for the framework's FA4 calls): the same structure with
FA4's tiles (``fa4_tile``), the exp beside the MMAs where ``softmax_overlap`` (pair =
max(MMA, exp)), a key-axis split of prefill calls whose CTAs leave SMs idle
(``fa4_prefill_splits``: the longest CTA's work / splits, a CTA cost per split, the fp32
partials written and read back), and one-token calls whose (sequence, KV head) tiles cost
SM time (``fa4_decode_tiles_s``: one after another where ``decode_tile_us`` > 0, FA4's
Hopper kernel, else the tile scheduler's scan) that the K/V stream, at min(BW, batch x
``seq_stream_gbps``), overlaps::

    decode (fa4, Hopper): T = decode_call + batch x seq_ns
                              + max(fa4_decode_tiles_s, K,V bytes / min(BW, batch x seq_stream))

"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING

from archsim.arch.base import Estimate
from archsim.arch.gpu.datapath import (
    L2_SECTOR_BITS,
    RF_READ_B_PER_MAC,
    RF_WIDTH_BITS,
    RF_WRITE_B_PER_MAC,
    SMEM_WIDTH_BITS,
)
from archsim.arch.gpu.kernels import AttentionTime, attention_tc_format, unit_attention_time
from archsim.arch.gpu.spec import GpuSpec, PagedAttentionSpec
from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.ops import Attention

if TYPE_CHECKING:
    from archsim.arch.gpu.unit import TensorCoreGpu

__all__ = ["paged_attention_time", "paged_attention_parts", "runs_paged", "estimate_attention",
           "fa3_tile", "fa2_tile", "fa4_tile", "paged_tile", "paged_constants",
           "fa4_decode_tiles_s", "fa4_serial_decode", "fa4_prefill_splits",
           "FA4_SCAN_SEQS_PER_STEP",
           "FA4_SM100_BLOCK", "paged_kv_refusal", "FA2_PAGED_BLOCK_M", "fa3_cta_work"]


#: FA3's Hopper tile configurations (``hopper/tile_size.h`` ``tile_size_fwd_sm90``, tag C: read
#: in FlashAttention's source) for a paged KV cache loaded without TMA (vLLM's 16-token pages
#: are not a multiple of block N): per (16-bit or fp8 kernel, largest head_dim) -> block M,
#: block N (causal, window, neither), intra-warpgroup overlap (causal / window).
_FA3_TILES: dict[bool, tuple[tuple[int, int, tuple[int, int, int], tuple[bool, bool]], ...]] = {
    False: ((64, 192, (128, 160, 160), (True, False)), (96, 192, (128, 128, 128), (True, True)),
            (128, 128, (128, 128, 128), (True, True)), (192, 128, (96, 96, 96), (True, True)),
            (2**30, 128, (80, 64, 80), (True, True))),
    True: ((64, 192, (160, 160, 160), (True, True)), (96, 192, (128, 128, 128), (True, True)),
           (128, 128, (160, 160, 160), (True, True)), (192, 128, (160, 128, 160), (True, True)),
           (2**30, 128, (128, 64, 128), (False, False))),
}


def fa3_tile(head_dim: int, fp8: bool, window: int, causal: bool = True) -> tuple[int, int, bool]:
    """(block M, block N, intra-warpgroup overlap) of FA3's forward kernel on Hopper with a
    paged KV cache (``_FA3_TILES``): ``fp8`` = the e4m3 kernel (an fp8 KV cache; vLLM quantises
    the query to match). A window makes the kernel "local" (FA3 treats causal-with-window as
    local, not causal)."""
    for top, bm, bns, overlap in _FA3_TILES[fp8]:
        if head_dim <= top:
            kind = 1 if window > 0 else (0 if causal else 2)
            return bm, bns[kind], overlap[1 if window > 0 else 0]
    raise AssertionError("unreachable: the last bucket has no upper bound")


@lru_cache(maxsize=8192)
def fa3_cta_work(q_len: int, kv_len: int, group: int, window: int, causal: bool, bm: int,
                 bn: int) -> tuple[int, int, int]:
    """(CTAs, total pairs, largest CTA's pairs) of one (sequence, KV head) of FA3 prefill with
    packed GQA (``pack_gqa``, always on for a paged KV cache without TMA): the ``group`` query
    heads of one KV head are interleaved into the M dimension (packed row = query x group +
    head), one CTA per ``bm`` packed rows; a CTA visits every ``bn``-key tile holding a key one
    of its rows sees (causal: up to its last query; window: from its first query's window
    start) and computes those tiles whole (masking is per element, the MMA per tile)."""
    rows_total = q_len * group
    n = -(-rows_total // bm)
    total = largest = 0
    for j in range(n):
        lo, hi = j * bm, min(rows_total, (j + 1) * bm)
        q_lo, q_hi = lo // group, (hi - 1) // group
        last = kv_len - q_len + q_hi if causal else kv_len - 1
        first = max(0, kv_len - q_len + q_lo - window + 1) if window > 0 else 0
        w = (hi - lo) * (last // bn - first // bn + 1) * bn
        total += w
        largest = max(largest, w)
    return n, total, largest


#: FA2's split-KV forward kernel on Ampere (``run_mha_fwd_splitkv_dispatch`` in
#: ``csrc/flash_attn/src/flash_fwd_launch_template.h``, tag C: read in FlashAttention's source),
#: the kernel FA2 runs whenever the KV cache is paged (``run_mha_fwd(params, stream,
#: force_split_kernel=paged_KV)`` in ``flash_api.cpp``), as vLLM's FLASH_ATTN backend calls
#: it on sm80: block M 64 for every head_dim, block N by head_dim (largest head_dim, block N),
#: 4 warps, mma.sync m16n8k16.
FA2_PAGED_BLOCK_M = 64
_FA2_PAGED_BLOCK_N: tuple[tuple[int, int], ...] = ((64, 256), (128, 128), (2**30, 64))


def fa2_tile(head_dim: int) -> tuple[int, int, bool]:
    """(block M, block N, overlap) of FA2's split-KV forward kernel with a paged KV cache
    (:data:`FA2_PAGED_BLOCK_M`): 64 x 256 up to head_dim 64, 64 x 128 up to 128, 64 x 64
    above; the same tile causal, local (a window) or neither. ``overlap`` is True: FA2 has
    no overlapped and non-overlapped variants (its softmax is always issued between the MMAs
    by the same warps, which the fitted ``mma_efficiency`` includes)."""
    bn = next(n for top, n in _FA2_PAGED_BLOCK_N if head_dim <= top)
    return FA2_PAGED_BLOCK_M, bn, True


#: FA4's forward tiles on Hopper (``_tile_size_fwd_sm90`` in FlashAttention's
#: ``flash_attn/cute/interface.py``, tag C: read in its source; FA3's table retuned for the
#: CuTe-DSL kernel) as (largest head_dim, block M, block N (causal, window, neither)); every
#: configuration with intra-warpgroup overlap. Above head_dim 256 (vLLM 0.24's build runs
#: head_dim 512 there; upstream stops at 256) block M 64 x block N 64 (vLLM's fork,
#: vllm-project/flash-attention ``flash_attn/cute/interface.py``: ``FwdConfig(64, 64, False,
#: True)``): the O accumulator of 64 rows x 512 fp32 columns is split over the two MMA
#: warpgroups along N (128 registers a thread); the rows agree: one query head of 16k causal
#: tokens, 813 us, is one SM's share of 64-row CTAs (128-row ones would take twice it).
_FA4_SM90_TILES: tuple[tuple[int, int, tuple[int, int, int]], ...] = (
    (64, 192, (128, 128, 128)), (96, 192, (128, 128, 144)), (128, 128, (128, 128, 128)),
    (192, 128, (112, 96, 112)), (256, 128, (80, 64, 80)), (2**30, 64, (64, 64, 64)))
#: FA4 on Blackwell (``flash_fwd_sm100.py``, tag C): block M 128 per Q stage, two Q stages (256
#: rows a CTA, ping-pong softmax warpgroups) when the packed query rows exceed 128; block N 128.
FA4_SM100_BLOCK = (128, 128)


def fa4_tile(head_dim: int, window: int, causal: bool, tcgen05: bool, rows: int = 2**30
             ) -> tuple[int, int, bool]:
    """(block M, block N, overlap) of FA4's forward kernel: on Hopper (``tcgen05`` False) the
    :data:`_FA4_SM90_TILES` rule; on Blackwell 128 x 128 with two Q stages (block M 256) when
    the packed query rows of one KV head (``rows``) exceed 128."""
    if tcgen05:
        bm, bn = FA4_SM100_BLOCK
        return (2 * bm if rows > bm else bm), bn, True
    for top, bm, bns in _FA4_SM90_TILES:
        if head_dim <= top:
            return bm, bns[1 if window > 0 else (0 if causal else 2)], True
    raise AssertionError("unreachable: the last bucket has no upper bound")


def paged_constants(spec: GpuSpec, kernel: str | None = None) -> PagedAttentionSpec | None:
    """The paged-KV constants that price a call of FlashAttention generation ``kernel``
    (None: the one the GPU's backend runs, ``spec.paged_attention``): the GPU's own when its
    kernel is that generation, else ``spec.paged_attention_fa4`` for ``fa4`` (a Hopper GPU
    whose backend runs FA3 prices the framework's FA4 calls with them); None when the GPU
    has none for it. FA2/FA3 rows are priced with the GPU's own generation."""
    own = spec.paged_attention
    if kernel != "fa4" or (own is not None and own.kernel == "fa4"):
        return own
    return spec.paged_attention_fa4


def paged_tile(spec: GpuSpec, head_dim: int, fp8: bool, window: int, causal: bool = True,
               c: PagedAttentionSpec | None = None, rows: int = 2**30
               ) -> tuple[int, int, bool]:
    """(block M, block N, intra-warpgroup overlap) of the paged-KV prefill kernel of the
    constants ``c`` (default ``spec.paged_attention``): :func:`fa3_tile` on Hopper,
    :func:`fa2_tile` on Ampere, :func:`fa4_tile` for FA4 (Blackwell's tiles where the SM has
    tcgen05 MMAs, ``sm.mma_tile_m`` 128)."""
    c = spec.paged_attention if c is None else c
    if c is not None and c.kernel == "fa2":
        return fa2_tile(head_dim)
    if c is not None and c.kernel == "fa4":
        return fa4_tile(head_dim, window, causal, spec.sm.mma_tile_m >= 128, rows)
    return fa3_tile(head_dim, fp8, window, causal)


def paged_kv_refusal(spec: GpuSpec, kv_bits: int) -> str | None:
    """Why the GPU's paged-KV FlashAttention cannot run a KV cache of ``kv_bits`` bits per
    element (None: it can). An 8-bit cache needs an fp8 kernel (``mma_efficiency_fp8``):
    FA3's e4m3 kernel on Hopper. FlashAttention-2 has none: vLLM's FLASH_ATTN backend
    accepts an fp8 KV cache only where ``flash_attn_supports_fp8()`` (FA3 on sm90; vLLM
    ``vllm/attention/utils/fa_utils.py``, tag C), so on Ampere vLLM picks another attention
    backend (FlashInfer or Triton, which dequantise K/V in the kernel), not modelled here."""
    c = spec.paged_attention
    if c is None or kv_bits >= 16 or c.mma_efficiency_fp8 is not None:
        return None
    name = {"fa2": "FlashAttention-2", "fa4": "FlashAttention-4"}.get(
        c.kernel, "this GPU's FlashAttention")
    return (f"{name} (vLLM's FLASH_ATTN backend here) has no fp8 KV-cache kernel; vLLM "
            "serves an fp8 KV cache on this GPU with another attention backend (FlashInfer "
            "or Triton), which is not modelled")


def _query_format(op: Attention) -> str:
    """Tensor-core format of a paged-KV call's MMAs: the query's, 16-bit (an 8-bit activation
    model keeps its attention in bf16; fp32 inputs run the fp16 kernels), or fp8 with an fp8
    KV cache (FA3's e4m3 kernel needs Q, K and V in one format: vLLM quantises the query)."""
    if op.kv_bytes_per_element < 2.0:
        return "fp8_e4m3"
    if op.a_format.name in ("fp16", "fp32"):
        return "fp16"
    return op.a_format.name if op.a_format.bits >= 16 else "bf16"


def paged_attention_parts(spec: GpuSpec, op: Attention, kernel: str | None = None
                          ) -> AttentionTime:
    """The parts of one framework attention call through a paged-KV FlashAttention backend
    (module docstring; ``spec.paged_attention``), back to back: ``fixed_s`` (call, per token;
    decode: per CTA wave), ``sm_s`` (prefill: every CTA's fixed time, MMAs and exp over the
    SMs) and ``hbm_s`` (the stream); time = fixed + max(sm, hbm). Prefill when ``q_len`` > 1,
    else split-KV decode. The query is 16-bit, or fp8 with an fp8 KV cache
    (:func:`_query_format`).

    Traffic (energy only; the times are the fitted model's): prefill reads Q and the K/V of
    ``kv_len`` keys once and writes O and the new tokens' K/V into the cache; decode reads Q
    and the K/V of the keys seen and writes O and the new token's K/V.

    ``kernel``: price a call of that FlashAttention generation (:func:`paged_constants`;
    ``fa4`` on a Hopper GPU with ``paged_attention_fa4``), default the GPU's own."""
    c = paged_constants(spec, kernel)
    if c is None:
        raise ValueError(f"this GPU has no paged_attention constants for {kernel or 'its kernel'}")
    why = paged_kv_refusal(replace(spec, paged_attention=c), int(op.kv_bytes_per_element * 8))
    if why:
        raise WorkloadError(Problem(why, "--kv-format"))
    sms = spec.sm_count
    bw = spec.memory.sustained_bytes_per_s
    q_bpe = 2.0
    kv_bpe = op.kv_bytes_per_element
    fp8 = kv_bpe < q_bpe
    fixed = c.fp8_call_us * 1e-6 if fp8 else 0.0
    tokens = op.batch * op.q_len
    q_b = tokens * op.heads * op.head_dim * q_bpe
    new_kv_b = 2.0 * tokens * op.kv_heads * op.head_dim * kv_bpe
    pairs = float(op.batch * op.heads * op.pairs())
    if op.q_len <= 1:
        keys = max(op.keys_seen(), c.min_keys)
        stream_b = 2.0 * op.batch * op.kv_heads * keys * op.head_dim * kv_bpe
        # one CTA per (sequence, KV head): the group's query heads are its rows (FA3's
        # pack_gqa; FA2's seqlenq_ngroups_swapped, which FA2 does not take with a window,
        # flash_api.cpp: then one CTA per query head)
        unpacked = c.kernel == "fa2" and op.window > 0
        ctas = op.batch * (op.heads if unpacked else op.kv_heads)
        # FA4: its tiles (serial, or the scheduler's scan) are SM-side time that the K/V
        # stream overlaps; serial tiles replace the per-wave CTA cost
        tiles_s = fa4_decode_tiles_s(c, op.batch, ctas, sms) if c.kernel == "fa4" else 0.0
        waves = 0.0 if fa4_serial_decode(c, op.batch) else (
            max(1.0, ctas / sms) * (c.decode_cta_us * 1e-6 + op.head_dim * c.cta_dim_ns * 1e-9))
        fixed += (c.decode_call_us * 1e-6 + op.batch * c.seq_ns * 1e-9 + waves)
        if c.seq_stream_gbps is not None:
            bw = min(bw, op.batch * c.seq_stream_gbps * 1e9)
        read = q_b + 2.0 * op.batch * op.kv_heads * op.keys_seen() * op.head_dim * kv_bpe
        return AttentionTime(fixed, tiles_s, stream_b / bw, read, q_b + new_kv_b, pairs,
                             4.0 * pairs, True)
    f = spec.tensor_clock_mhz * 1e6
    # FA3 and FA4 pack the query heads of one KV head into block M (pack_gqa); FA2 packs
    # them only for a one-token query (seqlenq_ngroups_swapped): its prefill CTAs hold one
    # query head
    packed = c.kernel in ("fa3", "fa4") and op.heads % op.kv_heads == 0
    rows = op.q_len * (op.heads // op.kv_heads if packed else 1)
    bm, bn, overlap = paged_tile(spec, op.head_dim, fp8, op.window, op.causal, c, rows)
    eff = c.mma_efficiency_fp8 if fp8 and c.mma_efficiency_fp8 is not None \
        else c.mma_efficiency
    mma = float(spec.tc_rate_per_sm(_query_format(op))) * eff * f
    mma_s, exp_s = 2.0 * op.head_dim / mma, 1.0 / (spec.cuda_core.sfu_per_sm * f)
    pair_s = max(mma_s, exp_s) if c.softmax_overlap else mma_s + exp_s
    if not overlap:
        pair_s *= c.no_overlap_factor
    groups = op.kv_heads if packed else op.heads
    n, total, largest = fa3_cta_work(op.q_len, op.kv_len, op.heads // groups, op.window,
                                     op.causal, bm, bn)
    cta_s = c.cta_us * 1e-6 + bm * op.head_dim * c.cta_tile_ns * 1e-9
    units = op.batch * groups
    # FA4 splits the key axis when its CTAs leave SMs idle (num_splits_heuristic)
    splits = fa4_prefill_splits(units * n, -(-op.kv_len // bn), sms) if c.kernel == "fa4" \
        else 1
    t_sm = max(units * (n * splits * cta_s + total * pair_s) / sms,
               cta_s + largest / splits * pair_s)
    if splits > 1:
        # the fp32 partial outputs, written by the split CTAs and read by the kernel that
        # merges them (its launch hides behind the call's others: a fitted fixed cost came
        # out at 0.19 us)
        fixed += 2.0 * splits * tokens * op.heads * op.head_dim * _PARTIAL_BYTES / bw
    t_hbm = (2.0 * tokens * op.heads * op.head_dim * q_bpe
             + 2.0 * tokens * op.kv_heads * op.head_dim * kv_bpe) / bw
    kv_tok_b = 2.0 * op.kv_heads * op.head_dim * kv_bpe          # K and V of one token
    tok = (c.token_ns * 1e-9 + kv_tok_b / (c.cache_write_gbps * 1e9)) \
        * (c.fp8_token_factor if fp8 else 1.0)
    fixed += c.prefill_call_us * 1e-6 + tokens * tok
    read = q_b + 2.0 * op.batch * op.kv_heads * op.kv_len * op.head_dim * kv_bpe
    return AttentionTime(fixed, t_sm, t_hbm, read, q_b + new_kv_b, pairs, 4.0 * pairs, False,
                         pair_s * f)


#: bytes of one element of a split's partial output (fp32)
_PARTIAL_BYTES = 4.0


def fa4_prefill_splits(ctas: int, key_blocks: int, sms: int) -> int:
    """Key-axis splits FA4 gives a call of ``ctas`` (sequence, KV head, block M) tiles over
    ``key_blocks`` block-N tiles of keys (``num_splits_heuristic`` in FA4's
    ``flash_attn/cute/interface.py``): none up to 4 key blocks, else as many as fill the
    SMs, at most 128 and at most one per key block."""
    if key_blocks <= 4 or ctas <= 0:
        return 1
    return max(1, min(sms // ctas, 128, key_blocks))


#: sequences one step of FA4's varlen tile scheduler covers (a warp prefix sum: 31 lanes
#: carry a sequence, the last the running total; ``SingleTileVarlenScheduler``)
FA4_SCAN_SEQS_PER_STEP = 31


def fa4_serial_decode(c: PagedAttentionSpec, batch: int) -> bool:
    """Do the tiles of an FA4 one-token call of ``batch`` sequences run one after another
    (``decode_tile_us`` > 0, up to ``serial_max_batch`` sequences: FA4's Hopper kernel)?"""
    return c.kernel == "fa4" and c.decode_tile_us > 0.0 and (
        not c.serial_max_batch or batch <= c.serial_max_batch)


def fa4_decode_tiles_s(c: PagedAttentionSpec, batch: int, tiles: int, sms: int) -> float:
    """SM-side seconds of the (sequence, KV head) tiles of one FA4 one-token call.

    Serial (:func:`fa4_serial_decode`, measured on FA4's Hopper kernel: the call grows with
    batch x KV heads long before the SMs fill; the source does not say why): each tile
    ``decode_tile_us`` plus ``decode_tile_pair_ns`` per tile before it. Else the tiles run in
    parallel and each pays the linear scan by which FA4's varlen tile scheduler finds its
    sequence (``SingleTileVarlenScheduler``: one warp prefix sum of
    :data:`FA4_SCAN_SEQS_PER_STEP` sequences a step, ``scan_step_us`` each, up to the tile's
    own sequence: batch / 62 steps on average), spread over the SMs::

        serial:   tiles x decode_tile_us + tiles (tiles - 1) / 2 x decode_tile_pair_ns
        parallel: tiles x batch / (2 x 31) x scan_step_us / SMs
    """
    if fa4_serial_decode(c, batch):
        return (tiles * c.decode_tile_us * 1e-6
                + tiles * (tiles - 1) / 2.0 * c.decode_tile_pair_ns * 1e-9)
    return (tiles * batch / (2.0 * FA4_SCAN_SEQS_PER_STEP) * c.scan_step_us * 1e-6 / sms)


def paged_attention_time(spec: GpuSpec, op: Attention, kernel: str | None = None) -> float:
    """Seconds of one framework attention call through a paged-KV FlashAttention backend
    (:func:`paged_attention_parts`), back to back."""
    return paged_attention_parts(spec, op, kernel).time_s


def runs_paged(spec: GpuSpec, op: Attention) -> bool:
    """Is ``op`` priced by the paged-KV model: a forward call made through the paged-KV
    backend (``op.kernel == "paged"``) on a GPU with ``paged_attention`` constants? (Else the
    SDPA model: the backward pass, ``sdpa`` calls, GPUs without the constants.)"""
    return op.kernel == "paged" and spec.paged_attention is not None and op.pass_ == "fwd"


def estimate_attention(unit: TensorCoreGpu, op: Attention) -> Estimate:
    """The Estimate of a fused attention call on ``unit``: :func:`attention_time` (or
    :func:`paged_attention_parts`, :func:`runs_paged`), the action counts of its two GEMMs
    (tensor-core MACs, register traffic, K/V tiles from shared memory), the softmax on the
    CUDA cores, the HBM / L2 traffic, and the power cap. The paged model's time was fitted on
    back-to-back calls at the clock the board held, so the power cap sets only its energy
    (operating point, voltage), not its latency."""
    s = unit.spec
    paged = runs_paged(s, op)
    f = _query_format(op) if paged else attention_tc_format(s, op.a_format)
    rate = float(s.tc_rate_per_sm(f))
    t = paged_attention_parts(s, op) if paged else unit_attention_time(s, op)
    macs = float(op.macs())
    actions: dict[tuple[str, str], float] = {
        (unit.cname(f"tensor_core_{f}"), "mac"): macs,
        (unit.cname("regfile"), "read"): macs * RF_READ_B_PER_MAC / (RF_WIDTH_BITS / 8),
        (unit.cname("regfile"), "write"): macs * RF_WRITE_B_PER_MAC / (RF_WIDTH_BITS / 8),
        (unit.cname("cuda_core"), "op"): t.alu_ops + t.sfu_ops,
        # each K / V element read from shared memory serves head_dim MACs of one query row
        (unit.cname("smem"), "read"): macs * op.a_format.bytes_per_element / op.head_dim
        / (SMEM_WIDTH_BITS / 8),
        (unit.cname("l2"), "read"): t.read_b / (L2_SECTOR_BITS / 8),
        (unit.cname("hbm"), "read"): t.read_b,
        (unit.cname("hbm"), "write"): t.write_b}
    lat_s, actions, dvfs = unit.power_cap(t.time_s, t.fixed_s, t.sm_s, t.hbm_s, actions)
    if paged:
        lat_s = t.time_s
    cycles = unit.to_cycles(lat_s)
    body = max(t.sm_s, t.hbm_s)
    bound = "memory" if body == t.hbm_s else "compute"
    if paged and t.fixed_s > body:
        bound = "latency"
    util = op.effective_macs() / (s.sm_count * rate * cycles) if cycles else 0.0
    df = "attn_decode" if t.decode else "attn_fused"
    how = "split-KV decode" if t.decode else "flash prefill"
    if paged:
        how = f"paged-KV {how}"
    elif op.kernel == "paged" and op.pass_ == "fwd":
        how += " (no paged_attention constants: SDPA model)"
    return Estimate(op.name, op.kind, unit.name, df, cycles, unit.clock_hz,
                    macs=op.macs(), flops=op.flops(), dram_read_bytes=t.read_b,
                    dram_write_bytes=t.write_b, actions=MappingProxyType(actions),
                    utilization=min(1.0, util), bound=bound, mapping=how,
                    details=MappingProxyType({"sm_s": t.sm_s, "hbm_s": t.hbm_s, **dvfs}))
