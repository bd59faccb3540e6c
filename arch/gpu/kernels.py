"""Kernel-class models of the tensor-core GPU beyond the GEMM tile model.

FlashAttention (``workloads.ops.Attention``), as PyTorch SDPA runs it:

* **prefill** (FlashAttention-2 style, one CTA per (batch, head, 128-query block)): per tile
  the QK^T and PV MMAs, then the online softmax (one ``exp`` per score on the SFUs plus the
  max/sum/rescale on the FP32 lanes). The softmax is issued by the same warps between the two
  MMAs, so it does not overlap them::

      t_sm  = (macs / (SMs x MMA rate x eta) + pairs x max(1 / sfu_rate, 4 / fp32_rate))
              x imbalance (longest-first schedule of unequal causal CTAs, cta_imbalance)
      t_hbm = (Q + K + V + O bytes; one head's K/V re-read per query block if it
               does not fit in L2) / BW
      fill  = first wave's CTAs x (Q block + first K and V tiles) bytes / BW
      T     = launch + fill + max(t_sm, t_hbm)

  (imbalance and fill matter for short sequences: one wave of CTAs whose longest does
  1.8x the mean work at 512 causal tokens; at 2k+ tokens both are within 1%).

* **decode** (split-KV, FlashDecoding): ``q_len`` is tiny, the kernel streams K and V once
  at the HBM rate, split over the SMs along the key axis, then a second kernel combines
  the partial softmax sums (one more launch)::

      T = 2 x launch + dram_latency + (K + V + Q + O bytes) / BW

FlashAttention as vLLM calls it (the paged-KV backend: FA3, FA2, FA4):
``arch.gpu.paged_attention``.

Vector kernels (softmax, norms) read their input ``vector_read_passes`` times; a softmax
over wide rows on PyTorch's global-memory kernel (``softmax_path``) is priced by
``softmax_global_s`` (latency-bound scalar steps, rate-bound 16-byte steps).

Causal masking skips the masked triangle (``Attention.pairs``).
"""

from __future__ import annotations

import heapq
import math
from functools import lru_cache

from archsim.arch.gpu.spec import GpuSpec
from archsim.workloads.formats import NumberFormat
from archsim.workloads.ops import Attention, Norm, Op, Softmax

__all__ = ["attention_tc_format", "row_quant_s", "row_quant_fixed_s", "ROW_CHUNK_ELEMS",
           "AttentionTime", "attention_time",
           "cta_imbalance", "cta_pairs", "vector_read_passes", "vector_reread_bytes",
           "softmax_reread_s", "softmax_path", "softmax_steps", "softmax_global_s",
           "softmax_global_reread_b", "SOFTMAX_BLOCK_THREADS", "SOFTMAX_REG_MAX",
           "softmax_register_s", "softmax_register_blocks", "SOFTMAX_TWO_BLOCKS_MAX_ILP",
           "unit_attention_time", "NORM_VEC_ELEMS", "norm_kernels",
           "norm_pass_s"]

#: PyTorch keeps a softmax row in registers (one read) up to this many columns
#: (``dispatch_softmax_forward``: persistent warp softmax for dim <= 1024); longer rows
#: are read three times: max, sum of exp, normalise (``cunn_SoftMaxForward``).
_SOFTMAX_PERSISTENT_COLS = 1024


#: PyTorch's ``layer_norm_kernel.cu`` takes the vectorised kernel when the row width is a
#: multiple of ``vec_size`` = 4 elements (and the rows are aligned to 4 elements); otherwise
#: the scalar path: ``RowwiseMomentsCUDAKernel`` then ``LayerNormForwardCUDAKernel`` (tag C;
#: ``F.rms_norm`` shares the file). The H100 rows cannot tell 4 from 8: every aligned width
#: measured is a multiple of 8 and every unaligned one is odd.
NORM_VEC_ELEMS = 4


def _scalar_norm(spec: GpuSpec, op: Op) -> bool:
    return (isinstance(op, Norm) and op.cols % NORM_VEC_ELEMS != 0
            and spec.cuda_core.norm_scalar_bytes_per_clock is not None)


def norm_kernels(spec: GpuSpec, op: Op) -> int:
    """Kernels one layer/RMS norm launches: 2 on the scalar path (row moments, then apply),
    else 1 (the vectorised kernel, or a GPU without a scalar-path rate)."""
    return 2 if _scalar_norm(spec, op) else 1


def norm_pass_s(spec: GpuSpec, op: Op) -> float | None:
    """Seconds, at the top clock, of the two SM-issue-bound passes (row moments, then
    normalise) of a layer/RMS norm on PyTorch's scalar path (width not a multiple of
    NORM_VEC_ELEMS): ``2 x input bytes / (norm_scalar_bytes_per_clock x SMs x f)``; they
    overlap with the HBM stream (the kernel time is the larger). None for any other op, a
    vectorised width, or a GPU without that rate (the vectorised model applies)."""
    if not _scalar_norm(spec, op):
        return None
    rate = spec.cuda_core.norm_scalar_bytes_per_clock
    assert rate is not None
    assert isinstance(op, Norm)
    return 2.0 * op.stream_bytes() / (rate * spec.sm_count * spec.clock_hz)


#: PyTorch's softmax over rows wider than _SOFTMAX_PERSISTENT_COLS (``host_softmax`` in
#: ``SoftMax.cu``, tag C): one block of min(cols, 1024) threads per row (a multiple of the
#: warp); the row held in registers while ceil(cols / threads) < SOFTMAX_REG_MAX
#: (``cunn_SoftMaxForwardReg``), else in shared memory when the width is a multiple of the
#: 16-byte vector and the row fits in the 48 KiB a block may use (``cunn_SoftMaxForwardSmem``),
#: else three passes over global memory (``cunn_SoftMaxForward``: max, sum of exp, write).
SOFTMAX_BLOCK_THREADS = 1024
SOFTMAX_REG_MAX = 10
_SOFTMAX_SMEM_BYTES = 48 * 1024
#: resident blocks of 1,024 threads per SM (2,048 threads per SM on sm80/sm90, tag C)
_SOFTMAX_BLOCKS_PER_SM = 2
_VECTOR_LOAD_BYTES = 16
_WARP = 32


def softmax_path(op: Softmax) -> str:
    """Which of PyTorch's softmax kernels a row of ``op.cols`` takes: ``warp`` (up to 1,024
    columns, the persistent warp softmax), ``register``, ``smem`` or ``global`` (see
    ``SOFTMAX_BLOCK_THREADS``)."""
    cols = op.cols
    if cols <= _SOFTMAX_PERSISTENT_COLS:
        return "warp"
    threads = min(SOFTMAX_BLOCK_THREADS, -(-cols // _WARP) * _WARP)
    if -(-cols // threads) < SOFTMAX_REG_MAX:
        return "register"
    bpe = op.a_format.bytes_per_element
    smem_elems = (_SOFTMAX_SMEM_BYTES - threads // _WARP * 4) / bpe
    if cols % max(1, int(_VECTOR_LOAD_BYTES // bpe)) == 0 and cols < smem_elems:
        return "smem"
    return "global"


def softmax_steps(cols: int, bpe: float, threads: int = SOFTMAX_BLOCK_THREADS
                  ) -> tuple[float, float]:
    """(scalar steps, 16-byte steps) one thread makes per pass of ``cunn_SoftMaxForward`` over a
    row of ``cols`` elements, averaged over the rows' alignments (row ``r`` starts ``r x cols``
    elements in: its first ``shift`` = that offset mod the vector's elements are loaded one by
    one by one scalar step over ``threads`` elements; then ``floor(rest / (vec x threads))``
    vector steps; the tail one element per thread per step)."""
    vec = max(1, int(_VECTOR_LOAD_BYTES // bpe))
    scalar = vector = 0.0
    for r in range(vec):
        shift = (r * cols) % vec
        size, first = (cols + shift - threads, 1) if shift else (cols, 0)
        vector += max(0, size) // (vec * threads) / vec
        scalar += (first + -(-(max(0, size) % (vec * threads)) // threads)) / vec
    return scalar, vector


def softmax_global_s(spec: GpuSpec, op: Op) -> float | None:
    """Seconds, at the top clock, of the SM side of PyTorch's global-memory softmax
    (``softmax_path`` ``global``): each SM runs its rows two blocks at a time; per row and pass
    (max, sum, write) a thread makes :func:`softmax_steps` steps: a scalar step is one
    round trip (the first pass from DRAM, ``dram_latency_ns``; the re-reads from L2,
    ``softmax_step_ns``), the two resident blocks overlapping their waits; a 16-byte step moves
    1,024 x 16 B at ``softmax_vector_bytes_per_clock`` per SM::

        rows / SMs x [ scalar steps x (dram_latency + 2 x softmax_step) / 2
                       + 3 x vector steps x 16 KiB / (softmax_vector_bytes_per_clock x f) ]

    Overlapped with the HBM stream (the kernel time is the larger). None for any other op or
    path, or a GPU without the two constants."""
    c = spec.cuda_core
    if (not isinstance(op, Softmax) or c.softmax_step_ns is None
            or c.softmax_vector_bytes_per_clock is None or softmax_path(op) != "global"):
        return None
    scalar, vector = softmax_steps(op.cols, op.a_format.bytes_per_element)
    wait_s = scalar * (spec.dram_latency_ns + 2.0 * c.softmax_step_ns) * 1e-9
    stream_s = 3.0 * vector * SOFTMAX_BLOCK_THREADS * _VECTOR_LOAD_BYTES \
        / (c.softmax_vector_bytes_per_clock * spec.clock_hz)
    return op.rows / spec.sm_count * (wait_s / _SOFTMAX_BLOCKS_PER_SM + stream_s)


#: the register softmax's template ILP (elements a thread holds, ceil(cols / 1024)) up to which
#: two 1,024-thread blocks share an SM (32 registers a thread at most: 64 K registers / 2,048
#: threads); above it the kernel's registers leave room for one block (tag C, an assumption
#: the H100 rows bound: ILP 4 (widths 4095, 4096) runs two blocks per SM, ILP 8 (8191) one,
#: the only reading with a positive per-element time; ILP 5-7 are not measured)
SOFTMAX_TWO_BLOCKS_MAX_ILP = 4


def softmax_register_blocks(cols: int) -> tuple[int, int]:
    """(elements per thread, resident blocks per SM) of PyTorch's register softmax over rows
    of ``cols`` (``softmax_path`` ``register``): ILP = ceil(cols / threads), two blocks while
    ILP <= SOFTMAX_TWO_BLOCKS_MAX_ILP, else one."""
    threads = min(SOFTMAX_BLOCK_THREADS, -(-cols // _WARP) * _WARP)
    ilp = -(-cols // threads)
    return ilp, _SOFTMAX_BLOCKS_PER_SM if ilp <= SOFTMAX_TWO_BLOCKS_MAX_ILP else 1


def softmax_register_s(spec: GpuSpec, op: Op) -> float | None:
    """Seconds, at the top clock, of the SM side of PyTorch's register softmax
    (``softmax_path`` ``register``: one block per row, the row read once into registers,
    ILP elements a thread): the busiest SM runs ceil(rows / SMs) rows, ``blocks`` at a time
    (:func:`softmax_register_blocks`), each row taking ``softmax_reg_row_ns + ILP x
    softmax_reg_elem_ns``::

        ceil(ceil(rows / SMs) / blocks) x (softmax_reg_row_ns + ILP x softmax_reg_elem_ns)

    Overlapped with the HBM stream (input read once, output written). None for any other op
    or path, or a GPU without the two constants."""
    c = spec.cuda_core
    if (not isinstance(op, Softmax) or c.softmax_reg_row_ns is None
            or c.softmax_reg_elem_ns is None or softmax_path(op) != "register"):
        return None
    ilp, blocks = softmax_register_blocks(op.cols)
    waves = math.ceil(math.ceil(op.rows / spec.sm_count) / blocks)
    return waves * (c.softmax_reg_row_ns + ilp * c.softmax_reg_elem_ns) * 1e-9


def softmax_global_reread_b(spec: GpuSpec, op: Op) -> tuple[float, float]:
    """(bytes re-read from L2, bytes re-read from HBM) by the global softmax's two later
    passes: from L2 while the rows in flight (two per SM) fit in it, else from HBM; (0, 0)
    for any op :func:`softmax_global_s` does not price."""
    if not isinstance(op, Softmax) or softmax_global_s(spec, op) is None:
        return 0.0, 0.0
    extra = 2.0 * op.input_bytes()
    in_flight = _SOFTMAX_BLOCKS_PER_SM * spec.sm_count * op.cols * op.a_format.bytes_per_element
    return (extra, 0.0) if in_flight <= spec.l2.l2_bytes else (0.0, extra)


def vector_read_passes(op: Op) -> int:
    """Times a vector kernel reads its input (PyTorch CUDA kernels): softmax 1 (rows up to
    1024 columns) or 3 (max, sum, normalise); layer/RMS norm 2 (row moments, then apply:
    ``vectorized_layer_norm_kernel`` re-reads the row); element-wise 1. Re-reads hit L2 when
    the tensor fits in it, else HBM."""
    if isinstance(op, Softmax):
        return 1 if op.cols <= _SOFTMAX_PERSISTENT_COLS else 3
    if isinstance(op, Norm):
        return 2
    return 1


def vector_reread_bytes(op: Op) -> float:
    """Bytes a vector kernel's passes after the first read (:func:`vector_read_passes`):
    the input again, or for a norm the one tensor it normalises (a fused residual add's
    second pass reads the new stream it wrote, not both inputs: vLLM's
    ``fused_add_rms_norm_kernel``)."""
    one = op.stream_bytes() if isinstance(op, Norm) else op.input_bytes()
    return (vector_read_passes(op) - 1) * one


#: Query rows per CTA (FlashAttention-2 forward, head_dim 128); also the key tile.
FA_BLOCK_Q = 128
_DECODE_Q_MAX = 16      # q_len up to this runs the split-KV decode kernel


class AttentionTime:
    """Timing parts of one attention call (seconds at the top clock) and its traffic."""

    def __init__(self, fixed_s: float, sm_s: float, hbm_s: float, read_b: float,
                 write_b: float, sfu_ops: float, alu_ops: float, decode: bool,
                 pair_cycles: float = 0.0) -> None:
        #: tensor-clock cycles one SM spends per (query, key) pair (MMAs + softmax), for the
        #: cycle-level lowering (``arch.gpu.lower.lower_attention``)
        self.pair_cycles = pair_cycles
        self.fixed_s = fixed_s
        self.sm_s = sm_s
        self.hbm_s = hbm_s
        self.read_b = read_b
        self.write_b = write_b
        self.sfu_ops = sfu_ops
        self.alu_ops = alu_ops
        self.decode = decode

    @property
    def time_s(self) -> float:
        return self.fixed_s + max(self.sm_s, self.hbm_s)


def attention_time(spec: GpuSpec, op: Attention, mma_per_clock_sm: float) -> AttentionTime:
    """Fused attention on ``spec`` (see module docstring); ``mma_per_clock_sm`` = dense MACs
    per clock per SM of the operand format."""
    f = spec.tensor_clock_mhz * 1e6
    bw = spec.memory.sustained_bytes_per_s
    launch = spec.kernel_launch_s
    bpe = op.a_format.bytes_per_element
    pairs = float(op.batch * op.heads * op.pairs())
    q_b = op.batch * op.heads * op.q_len * op.head_dim * bpe
    kv_b = 2.0 * op.batch * op.kv_heads * op.kv_len * op.head_dim * op.kv_bytes_per_element
    o_b = op.output_bytes()
    sfu_rate = spec.sm_count * spec.cuda_core.sfu_per_sm * f
    alu_rate = spec.sm_count * spec.cuda_core.fp32_lanes_per_sm * f
    mma_rate = spec.sm_count * mma_per_clock_sm * spec.tensor_core.mma_efficiency * f
    t_soft = max(pairs / sfu_rate, 4.0 * pairs / alu_rate)   # SFU and FP32 pipes overlap
    t_mma = op.macs() / mma_rate
    if op.q_len <= _DECODE_Q_MAX:
        read = q_b + kv_b * op.keys_seen() / op.kv_len
        return AttentionTime(2 * launch + spec.dram_latency_ns * 1e-9, t_mma + t_soft,
                             (read + o_b) / bw, read, o_b, pairs, 4.0 * pairs, True)
    # K/V of one (batch, kv head) are re-read by every query block unless they stay in L2
    qblocks = -(-op.q_len // FA_BLOCK_Q)
    # the query blocks of one head run concurrently (adjacent CTAs), so that head's K/V
    # (not the whole tensor) must fit in the usable L2 to be fetched once
    fits = kv_b / (op.batch * op.kv_heads) <= spec.l2.l2_bytes * spec.l2.usable_fraction
    read = q_b + (kv_b if fits else kv_b * qblocks / 2.0)
    t_sm = (t_mma + t_soft) * cta_imbalance(op, spec.sm_count)
    pair_cycles = (t_mma + t_soft) * f * spec.sm_count / pairs if pairs else 0.0
    # pipeline fill: every CTA of the first wave loads its Q block and first K and V tiles
    # before its first MMA, all at once, sharing HBM; later loads overlap the MMAs
    n_cta = op.batch * op.heads * qblocks
    fill = min(n_cta, spec.sm_count) * 3 * FA_BLOCK_Q * op.head_dim * bpe / bw
    return AttentionTime(launch + spec.dram_latency_ns * 1e-9 + fill, t_sm,
                         (read + o_b) / bw, read, o_b, pairs, 4.0 * pairs, False, pair_cycles)


def cta_pairs(op: Attention) -> list[int]:
    """(query, key) pairs of each prefill CTA of one (batch, head): one CTA per 128-query
    block; causal row ``r`` sees ``kv_len - q_len + r + 1`` keys (at most ``window``). Sums
    to ``op.pairs()``."""
    q, kv, B, w = op.q_len, op.kv_len, FA_BLOCK_Q, op.window
    sizes = []
    for j in range(-(-q // B)):
        lo, hi = j * B, min(q, (j + 1) * B)
        rows = hi - lo
        if op.causal:
            first = kv - q + lo + 1                      # keys seen by the block's first row
            if w > 0:       # rows seeing first, first + 1, ... keys, each capped at w
                short = max(0, min(rows, w - first))
                sizes.append(short * first + short * (short - 1) // 2 + (rows - short) * w)
            else:
                sizes.append(rows * first + rows * (rows - 1) // 2)
        else:
            sizes.append(rows * (min(kv, w) if w > 0 else kv))
    return sizes


#: Above this many CTAs the greedy schedule is not simulated: the bound
#: max(total / SMs, largest CTA) is then within 1.5% of it (1,024 CTAs on 132 SMs).
_LPT_MAX_CTAS = 1024


def cta_imbalance(op: Attention, sm_count: int) -> float:
    """Makespan of the prefill CTAs over ``sm_count`` SMs, relative to perfectly balanced
    work (>= 1). One CTA per (batch, head, 128-query block) and one CTA per SM at a time
    (FlashAttention-2's shared-memory footprint); CTA ``j`` of a causal head computes the
    pairs of its query rows only (row ``r`` sees ``kv_len - q_len + r + 1`` keys), so the
    last block of a head does the most work. FlashAttention-2 launches the heavy blocks first
    and an SM takes the next CTA when it frees, i.e. greedy longest-first (LPT): with few
    CTAs (short sequences, one wave) the longest CTA or a last partial wave sets the time,
    with many the work evens out."""
    return _imbalance(tuple(cta_pairs(op)), op.batch * op.heads, sm_count, _LPT_MAX_CTAS)


@lru_cache(maxsize=4096)
def _imbalance(sizes_t: tuple[int, ...], heads: int, sm_count: int, lpt_max: int) -> float:
    sizes = list(sizes_t)
    total = float(sum(sizes)) * heads
    if total <= 0:
        return 1.0
    balanced = total / sm_count
    n = len(sizes) * heads
    if n > lpt_max:
        return max(balanced, float(max(sizes))) / balanced

    loads = [0.0] * min(sm_count, n)
    heapq.heapify(loads)
    for size in sorted(sizes * heads, reverse=True):
        heapq.heapreplace(loads, loads[0] + size)
    return max(loads) / balanced


def attention_tc_format(spec: GpuSpec, fmt: NumberFormat) -> str:
    """Tensor-core format of a FlashAttention call whose activations are ``fmt``: fp32
    inputs run the fp16 kernels; FP4/FP6 activations (the GEMM inputs of an NVFP4 model)
    have no attention kernel of their own, so Q.K and P.V run in fp8 where the GPU has it,
    else in bf16; every other format is its own."""
    if fmt.name in ("fp16", "fp32"):
        return "fp16"
    if fmt.is_float and fmt.bits < 8:
        return "fp8_e4m3" if spec.tc_rate_per_sm("fp8_e4m3") else "bf16"
    return fmt.name


def softmax_reread_s(spec: GpuSpec, op: Op) -> float:
    """Seconds of a softmax's re-read passes when they run after the stream, issue-bound at
    ``cuda_core.reduce_pass_bytes_per_clock`` per SM (0 for other ops, rows of at most
    1,024 columns, or a GPU without that rate)."""
    rate = spec.cuda_core.reduce_pass_bytes_per_clock
    if (not rate or not isinstance(op, Softmax) or softmax_global_s(spec, op) is not None
            or softmax_register_s(spec, op) is not None):
        return 0.0
    extra = vector_reread_bytes(op)
    return extra / (rate * spec.sm_count * spec.clock_hz)


def unit_attention_time(spec: GpuSpec, op: Attention) -> AttentionTime:
    """:func:`attention_time` at the tensor-core rate of ``op``'s format (fp32 inputs run the
    fp16 kernels)."""
    f = attention_tc_format(spec, op.a_format)
    return attention_time(spec, op, float(spec.tc_rate_per_sm(f)))


#: Elements of a row one pass of a 256-thread CTA covers with 16-byte loads of 16-bit values
#: (the step width of the per-token cost in kernels_h100/gemm.csv.gz fp8 rows).
ROW_CHUNK_ELEMS = 2048


def row_quant_s(spec: GpuSpec, rows: int, cols: int, in_bpe: float, out_bpe: float) -> float:
    """Dynamic per-row (per-token) quantisation kernel, one CTA per row (vLLM's
    ``dynamic_per_token_scaled_fp8_quant``)::

        fixed + max(HBM bytes / sustained BW,
                    ceil(rows / SMs) x (quant_row_us + ceil(cols / 2048) x quant_chunk_us))

    HBM bytes: the input once (the second pass, quantise after absmax, hits L1/L2), the
    quantised output and one fp32 scale per row. Without ``spec.quant_row_us``: the stream.
    ``fixed``: :func:`row_quant_fixed_s`."""
    bw = spec.memory.sustained_bytes_per_s
    hbm = rows * (cols * (in_bpe + out_bpe) + 4) / bw
    sm = 0.0
    if spec.quant_row_us is not None:
        per_row = (spec.quant_row_us + -(-cols // ROW_CHUNK_ELEMS) * spec.quant_chunk_us) * 1e-6
        sm = -(-rows // spec.sm_count) * per_row
    return row_quant_fixed_s(spec) + max(hbm, sm)


def row_quant_fixed_s(spec: GpuSpec) -> float:
    """Fixed cost (s) of the per-row quantisation kernel under ``spec.runtime``:
    ``quant_call_us`` back to back (plus ``launch_overhead_us - launch_b2b_us`` when launched
    alone, ``runtime: ideal``); without it, launch + DRAM latency like any kernel."""
    if spec.quant_call_us is None:
        return spec.kernel_launch_s + spec.dram_latency_ns * 1e-9
    b2b_us = spec.launch_b2b_us if spec.launch_b2b_us is not None else spec.launch_overhead_us
    return spec.quant_call_us * 1e-6 + spec.kernel_launch_s - b2b_us * 1e-6
