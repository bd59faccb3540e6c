"""Fused mixture-of-experts layer on the tensor-core GPU, as vLLM's ``FusedMoE`` runs it.

One call (``workloads.ops.FusedMoE``) is: top-k over the router scores, the token alignment
(``moe_align_block_size``: the (token, expert) pairs sorted by expert, each expert's run
padded to the kernel's block M), the grouped gate+up GEMM (one kernel over the experts that
received tokens: expert ``e``'s M = its tokens), the SwiGLU, the grouped down GEMM and the
weighted combine (``moe_sum``). Constants per kernel and weight format are in
``GpuSpec.fused_moe`` (:class:`~archsim.arch.gpu.spec.MoeKernelSpec`)::

    T = call [+ sort_us above 16 tokens with EP] + tokens x (token_ns + token_hidden_b x hidden / BW)
        + pairs x (pair_width_b x width + pair_hidden_b x hidden) / BW      (every pair)
        + local pairs x (local_width_b x width + local_hidden_b x hidden) / BW
        + experts hit x expert_us
        + G(N = 2 width, K = hidden) + G(N = hidden, K = width)     (non-gated: N = width)
    G   = max(compute, stream)
    compute = (sum_e ceil(m_e / BM) x BM) x N x K / (SMs x FMA rate x mma_efficiency)
              [+ sum_e ceil(m_e / BM) x N x K / (SMs x dequant_per_clock x clock): 4-bit
               weight-only kernels dequantise each M tile's weights on the CUDA cores]
              [partial_tile_gbps set (CUTLASS per-tensor fp8): an expert's last, partial tile
               costs N x K x weight bytes / partial_tile_gbps instead of its padded MMAs]
    stream  = (experts hit x N x K x weight bytes + sum_e m_e x (K x act bytes + N x 2))
              / min(BW x stream_efficiency, CTAs x cta_gbps)
    CTAs    = sum_e ceil(m_e / BM) x ceil(N / block_n)

``m_e`` are the tokens of each local expert on the busiest device
(``workloads.routing.device_loads``: balanced or power-law routing, expert parallelism =
``experts / ep`` local experts); experts with no token cost nothing (no tile), those hit
read their whole weights whatever their M. BM = ``block_m_small`` when tokens <= experts
(vLLM's small-batch config), else ``block_m``. ``pairs`` counts every (token, expert)
pair, local or not: vLLM's Triton path sizes its intermediate caches by all of them and
zero-fills the rows of other devices' experts (``expert_map``), which is why an EP rank's
time grows with the global token count even when its own experts get few.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import TYPE_CHECKING

from archsim.arch.base import Estimate
from archsim.arch.gpu.spec import GpuSpec, MoeKernelSpec
from archsim.workloads.ops import FusedMoE

if TYPE_CHECKING:
    from archsim.arch.gpu.unit import TensorCoreGpu

__all__ = ["moe_kernel_spec", "fused_moe_time", "MoeTime", "estimate_fused_moe",
           "MOE_FORMATS", "MARLIN_BLOCK_M", "block_m", "weight_only"]

#: weight formats the fused-MoE model prices (16-bit, fp8 e4m3, and the 4-bit weight-only
#: kernels' int4 and mxfp4)
MOE_FORMATS = ("bf16", "fp16", "fp8_e4m3", "int4", "mxfp4")
#: block M candidates of vLLM's Marlin MoE (``fused_marlin_moe``, tag C): the first whose
#: mean tokens per local expert over it is below :data:`MARLIN_FILL`, else the last
MARLIN_BLOCK_M = (8, 16, 32, 48, 64)
MARLIN_FILL = 0.9
#: most tokens triton_kernels' routing sorts with its one fused kernel
#: (``sort_tokens_fused``, tag C); above, a multi-kernel sort, which costs a call
#: ``MoeKernelSpec.sort_us`` more under expert parallelism (the table shows the step there
#: only: with EP 1 the call does not change from 16 to 32 tokens)
FUSED_SORT_MAX_TOKENS = 16


def _key(op: FusedMoE) -> str:
    if op.w_format.name in ("bf16", "fp16"):
        return f"{op.backend}_bf16"
    if weight_only(op):
        return f"{op.backend}_{op.w_format.name}"
    return f"{op.backend}_fp8_block" if op.fp8_block else f"{op.backend}_fp8"


def weight_only(op: FusedMoE) -> bool:
    """4-bit weights (int4, mxfp4): the kernels keep 16-bit activations and dequantise the
    weights into 16-bit MMAs (W4A16)."""
    return op.w_format.bytes_per_element < 1


def block_m(k: MoeKernelSpec, op: FusedMoE) -> int:
    """Rows of the kernel's tile (``k.block_m_rule``): ``fixed``: vLLM's Triton defaults
    (``block_m_small`` when tokens <= experts, else ``block_m``); ``marlin``: the first of
    :data:`MARLIN_BLOCK_M` with tokens x top_k / local experts / BM below
    :data:`MARLIN_FILL`; ``pow2``: triton_kernels' routing, the mean pairs per expert
    ``floor(tokens x top_k / experts)`` (at least 1) rounded up to a power of two, clamped to
    [block_m_small, block_m]."""
    if k.block_m_rule == "marlin":
        mean = op.tokens * op.top_k / op.local_experts
        return next((b for b in MARLIN_BLOCK_M if mean / b < MARLIN_FILL), MARLIN_BLOCK_M[-1])
    if k.block_m_rule == "pow2":
        per = max(1, op.tokens * op.top_k // op.experts)
        return max(k.block_m_small, min(1 << (per - 1).bit_length(), k.block_m))
    return k.block_m_small if op.tokens <= op.experts else k.block_m


def moe_kernel_spec(spec: GpuSpec, op: FusedMoE) -> MoeKernelSpec | str:
    """The constants that price ``op`` on ``spec``, or the reason it cannot be priced."""
    if op.w_format.name not in MOE_FORMATS:
        return (f"fused MoE with {op.w_format.name} weights is not modelled (expected "
                f"{', '.join(MOE_FORMATS)})")
    if spec.fused_moe is None:
        return "no fused_moe constants for this GPU"
    k = getattr(spec.fused_moe, _key(op), None)
    if k is None:
        have = [f.name for f in fields(spec.fused_moe)
                if getattr(spec.fused_moe, f.name) is not None]
        return f"no fused_moe constants for {_key(op)} (this GPU has {', '.join(have)})"
    return k


@dataclass(frozen=True)
class MoeTime:
    """Parts of one fused-MoE call (seconds) and its traffic (bytes)."""

    fixed_s: float
    compute_s: float
    stream_s: float
    read_b: float
    write_b: float
    experts_hit: int
    local_pairs: float

    @property
    def time_s(self) -> float:
        return self.fixed_s + self.compute_s + self.stream_s


def _grouped(spec: GpuSpec, k: MoeKernelSpec, loads: tuple[float, ...], n: int, kk: int,
             bm: int, w_bpe: float, a_bpe: float, mma_per_s_sm: float, clock_hz: float
             ) -> tuple[float, float, float, float]:
    """(time, compute time, read bytes, write bytes) of one grouped GEMM. With
    ``k.partial_tile_gbps`` an expert's last, partial tile costs its weights at that rate
    instead of its (padded) MMAs; with ``k.dequant_per_clock`` every M tile dequantises its
    N x K weights on the SMs' CUDA cores before its MMAs (in series with them)."""
    tiles = sum(math.ceil(m / bm) for m in loads)
    ctas = tiles * math.ceil(n / k.block_n)
    full = tiles
    partial_s = 0.0
    if k.partial_tile_gbps is not None:
        full = sum(math.floor(m / bm + 1e-9) for m in loads)
        partial_s = (tiles - full) * n * kk * w_bpe / (k.partial_tile_gbps * 1e9)
    compute = (full * bm * n * kk / (spec.sm_count * mma_per_s_sm * k.mma_efficiency)
               + partial_s)
    if k.dequant_per_clock is not None:
        compute += tiles * n * kk / (spec.sm_count * k.dequant_per_clock * clock_hz)
    read = len(loads) * n * kk * w_bpe + sum(loads) * kk * a_bpe
    write = sum(loads) * n * 2.0
    bw = min(spec.memory.sustained_bytes_per_s * k.stream_efficiency, ctas * k.cta_gbps * 1e9)
    stream = (read + write) / bw if ctas else 0.0
    return max(compute, stream), compute, read, write


def _mma_format(op: FusedMoE) -> str:
    """The tensor-core format of the grouped GEMMs: fp8 for fp8 weights, else 16-bit (the
    4-bit kernels dequantise into 16-bit MMAs)."""
    return "fp8_e4m3" if op.w_format.bytes_per_element == 1 else "fp16"


def fused_moe_time(spec: GpuSpec, op: FusedMoE) -> MoeTime:
    """One fused-MoE call on ``spec`` (module doc), back to back (the framework's protocol).

    Raises:
        ValueError: ``op`` cannot be priced on ``spec`` (:func:`moe_kernel_spec` says why).
    """
    k = moe_kernel_spec(spec, op)
    if isinstance(k, str):
        raise ValueError(k)
    loads = op.loads()
    bm = block_m(k, op)
    w_bpe = op.w_format.bytes_per_element
    # fp8 kernels quantise the activations too; 4-bit ones keep them 16-bit (W4A16)
    a_bpe = 2.0 if weight_only(op) else w_bpe
    fmt = _mma_format(op)
    clock = spec.tensor_clock_mhz * 1e6
    mma = float(spec.tc_rate_per_sm(fmt)) * clock
    up = op.matrices - 1                # gate + up, or up alone
    g1 = _grouped(spec, k, loads, up * op.width, op.hidden, bm, w_bpe, a_bpe, mma, clock)
    g2 = _grouped(spec, k, loads, op.hidden, op.width, bm, w_bpe, a_bpe, mma, clock)
    bw = spec.memory.sustained_bytes_per_s
    pairs = float(op.tokens * op.top_k)
    local = sum(loads)
    # per-width bytes are for gated experts (gate+up cache written and read, activation
    # written: 2 x 2w + w); non-gated ones move 2 x w + w of them
    wide = op.width * (2 * up + 1) / 5.0
    pair_b = pairs * (k.pair_width_b * wide + k.pair_hidden_b * op.hidden)
    local_b = local * (k.local_width_b * wide + k.local_hidden_b * op.hidden)
    tok_b = op.tokens * k.token_hidden_b * op.hidden
    sort = k.sort_us if op.tokens > FUSED_SORT_MAX_TOKENS and op.ep > 1 else 0.0
    fixed = ((k.call_us + sort) * 1e-6 + op.tokens * k.token_ns * 1e-9
             + len(loads) * k.expert_us * 1e-6
             + (pair_b + local_b + tok_b) / bw)
    body = g1[0] + g2[0]
    compute = min(body, g1[1] + g2[1])
    side_b = 0.5 * (pair_b + local_b + tok_b)
    return MoeTime(fixed, compute, body - compute, g1[2] + g2[2] + side_b,
                   g1[3] + g2[3] + side_b, len(loads), local)


def estimate_fused_moe(unit: TensorCoreGpu, op: FusedMoE) -> Estimate:
    """The Estimate of a fused-MoE call on ``unit``: :func:`fused_moe_time`, tensor-core MACs
    of the padded tiles' useful part, the HBM traffic (the weights of the experts hit, the
    activations, the intermediate caches)."""
    s = unit.spec
    t = fused_moe_time(s, op)
    fmt = _mma_format(op)
    macs = float(op.macs())
    actions: dict[tuple[str, str], float] = {
        (unit.cname(f"tensor_core_{fmt}"), "mac"): macs,
        (unit.cname("cuda_core"), "op"): float(op.vector_ops()),
        (unit.cname("hbm"), "read"): t.read_b,
        (unit.cname("hbm"), "write"): t.write_b}
    cycles = unit.to_cycles(t.time_s)
    rate = float(s.tc_rate_per_sm(fmt)) * s.sm_count
    util = macs / (rate * cycles) if cycles else 0.0
    return Estimate(op.name, op.kind, unit.name, "fused_moe", cycles, unit.clock_hz,
                    macs=op.macs(), flops=op.flops(), dram_read_bytes=t.read_b,
                    dram_write_bytes=t.write_b, actions=MappingProxyType(actions),
                    utilization=min(1.0, util),
                    bound="compute" if t.compute_s >= t.stream_s else "memory",
                    mapping=f"{op.backend} grouped GEMMs, {t.experts_hit} experts hit",
                    details=MappingProxyType({"fixed_s": t.fixed_s, "compute_s": t.compute_s,
                                              "stream_s": t.stream_s,
                                              "experts_hit": float(t.experts_hit),
                                              "local_pairs": t.local_pairs}))
