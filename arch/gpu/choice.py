"""Which GEMM kernel class a GPU library runs for a shape: the alignment rule.

cuBLAS / CUTLASS pick a kernel from the operands' row alignment before anything else:

* ``tma`` — every row of A (K elements) and of B (N elements; weight ``[n, k]``, output
  ``[m, n]``) is a multiple of 16 bytes. The tensor-memory accelerator (TMA) and 16-byte
  vector loads need 16-byte aligned rows (CUDA TMA descriptor rule); on Hopper these are the
  wgmma kernels the tile model is calibrated on (``rate_fraction`` 1).
* ``narrow`` — the rows are 4- or 8-byte aligned but not 16: ``cp.async`` of 4 / 8 bytes
  (its legal sizes are 4, 8, 16) feeds Ampere-style ``mma.sync`` kernels (CUTLASS
  ``sm80_*_align2/align4``). Same kernel generation as PyTorch's ``_int_mm`` int8 path on
  sm90, so the rate fraction is ``tensor_core.unaligned_rate_fraction`` (H100: fitted on the
  int8 rows as ``library_rate_fraction.int8``, checked on the K = 4100 bf16 row; docs/gpu.md).
* ``align1`` — a row is only 1- or 2-byte aligned (an odd N or K in 16-bit formats, e.g. a
  50257-token vocabulary): no vector load is legal, every element is a scalar load, and the
  libraries run the Turing-class ``cutlass_75_tensorop_*_s1688gemm_*_align1`` kernels
  (``h100_2026-11-26_profile.jsonl``) at ``tensor_core.align1_rate_fraction`` of the MMA rate
  (H100: fitted on the 2048 x 50257 LM heads, checked on 8192 x 50257 and 4096 x 4095;
  docs/gpu.md).

Neither fallback class uses TMA multicast or the persistent stream-K scheduler (both are
sm90 TMA-kernel features), so :func:`kernel_spec` switches them off for the tile search.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from archsim.arch.gpu.spec import GpuSpec

__all__ = ["GemmKernelClass", "gemm_kernel_class", "row_alignment_bytes", "kernel_spec"]

_VECTOR_BYTES = 16     # widest vector load / TMA alignment
_CP_ASYNC_MIN = 4      # narrowest cp.async size


@dataclass(frozen=True)
class GemmKernelClass:
    """A library kernel class: its name, the fraction of the MMA rate it reaches and whether
    it has the TMA features (cluster multicast, stream-K)."""

    name: str
    rate_fraction: float
    tma: bool


def row_alignment_bytes(elems: int, bits: int) -> int:
    """Largest power of two (<= 16) dividing the byte length of a row of ``elems`` elements
    of ``bits`` bits (sub-byte rows round down to the byte)."""
    nbytes = elems * bits // 8
    if nbytes <= 0 or (elems * bits) % 8:
        return 1
    a = 1
    while a < _VECTOR_BYTES and nbytes % (2 * a) == 0:
        a *= 2
    return a


def gemm_kernel_class(spec: GpuSpec, n: int, k: int, a_bits: int, b_bits: int,
                      padded: bool = False) -> GemmKernelClass:
    """The kernel class a library runs for a GEMM with ``n`` output features and reduction
    ``k`` (A rows: k x a_bits, B rows: n and k x b_bits, C rows: n x a_bits).

    ``padded``: an implicit-GEMM convolution, whose library pads the channel dimension to a
    vector width (cuDNN's NHWC kernels), so its rows are never worse than ``narrow``."""
    tc = spec.tensor_core
    align = min(row_alignment_bytes(k, a_bits), row_alignment_bytes(k, b_bits),
                row_alignment_bytes(n, a_bits), row_alignment_bytes(n, b_bits))
    if align >= _VECTOR_BYTES:
        return GemmKernelClass("tma", 1.0, True)
    if align >= _CP_ASYNC_MIN or padded:
        return GemmKernelClass("narrow", tc.unaligned_rate_fraction, False)
    return GemmKernelClass("align1", tc.align1_rate_fraction, False)


def kernel_spec(spec: GpuSpec, kc: GemmKernelClass) -> GpuSpec:
    """``spec`` as the tile search sees it for kernel class ``kc``: a non-TMA class has no
    cluster multicast and no stream-K scheduler."""
    if kc.tma or (spec.sm.cluster_multicast == 1 and not spec.sm.stream_k):
        return spec
    return replace(spec, sm=replace(spec.sm, cluster_multicast=1, stream_k=False))
