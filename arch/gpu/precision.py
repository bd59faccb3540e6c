"""Which datapath runs a GEMM with given operand formats: the MMA plan.

A GEMM ``C = A (a_format) x B (b_format)`` runs on one of:

* ``tc``: a tensor-core format that matches both operands (fp16 x fp16, int8 x int8 ...);
  a narrower float operand is converted in the mainloop (CUDA-core ops per element).
* ``w_only``: weight-only quantisation (float activations, int/fp8/block weights),
  Marlin-style: B travels at its storage width and is dequantised on the CUDA cores
  (``dequant_ops_per_weight`` per element) into the activation's tensor-core format.
* ``digit``: integer operands wider than a tensor-core integer format are split into
  digits: ``ceil(a_bits / f) x ceil(b_bits / f)`` MMA passes of format ``int<f>``.
* ``bitserial``: bit-serial on binary tensor cores (``int1``): a ``w``-bit x ``a``-bit
  product is ``w x a`` one-bit MMAs (bipolar-INT encoding, BSTC/FlexQ); cheapest only for
  very low widths, forced with ``dataflow="bitserial"``.
* ``simt``: fp32 (and anything without a tensor-core path) on the CUDA-core FMA lanes.

Among the integer plans the one with the fewest ``passes / rate`` wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archsim.arch.gpu.spec import GpuSpec
from archsim.workloads.formats import NumberFormat

__all__ = ["MmaPlan", "plan_mma", "candidate_plans", "tc_format_name", "narrow_float_refusal",
           "missing_compute_format"]

_FLOAT_TC = ("tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")

_INT_TC = ("int8", "int4", "int1")


@dataclass(frozen=True)
class MmaPlan:
    """How a GEMM's multiply-accumulates are executed.

    Attributes:
        path: ``tc``, ``w_only``, ``digit``, ``bitserial`` or ``simt``.
        tc_format: tensor-core format name (``"fp32_simt"`` for the SIMT path).
        passes: MMA instructions' worth of work per logical MAC (1 unless decomposed).
        rate_per_sm: dense FMAs per clock per SM of the datapath used.
        a_convert_ops, b_convert_ops: CUDA-core ops per loaded A / B element (conversion,
            dequantisation, bit-plane extraction).
        operand_bits: bits per element the MMA consumes (sets the k-tile depth).
        tensor: True when the tensor cores run it (tensor clock and MMA efficiency apply).
    """

    path: str
    tc_format: str
    passes: int
    rate_per_sm: float
    a_convert_ops: float = 0.0
    b_convert_ops: float = 0.0
    operand_bits: int = 16
    tensor: bool = True

    @property
    def macs_per_clock_sm(self) -> float:
        """Logical MACs per clock per SM (rate / passes)."""
        return self.rate_per_sm / self.passes

    def describe(self) -> str:
        p = f" x{self.passes}" if self.passes > 1 else ""
        return f"{self.path}:{self.tc_format}{p}"


def _ibits(f: NumberFormat) -> int:
    """Bits of an integer-like operand as the MMA sees it (ternary: 2, block int: element)."""
    return f.bits


def _tc_bits(name: str) -> int:
    # fp6 operands sit in 8-bit containers in shared memory (tcgen05 kind::f8f6f4); fp4 of
    # the block-scaled kinds (kind::mxf4 / nvf4) is packed two to a byte.
    return {"tf32": 32, "fp16": 16, "bf16": 16, "fp8_e4m3": 8, "fp8_e5m2": 8, "fp6": 8,
            "fp4": 4, "int8": 8,
            "int4": 4, "int1": 1, "fp64": 64, "fp32": 32}[name]


def _simt(spec: GpuSpec, a_conv: float = 0.0, b_conv: float = 0.0) -> MmaPlan:
    return MmaPlan("simt", "fp32_simt", 1, float(spec.cuda_core.fp32_lanes_per_sm), a_conv,
                   b_conv, 32, tensor=False)


def tc_format_name(f: NumberFormat) -> str:
    """The tensor-core rate key of a format: FP6 (E2M3, E3M2) -> ``fp6``; FP4 E2M1, plain
    or block-scaled (nvfp4, mxfp4) -> ``fp4`` (the block scale is applied by the MMA
    itself on Blackwell); every other format is its own key."""
    if f.is_float and f.bits in (4, 6):
        return f"fp{f.bits}"
    return f.name


def _narrow_float(f: NumberFormat) -> bool:
    return f.is_float and f.bits < 8


def narrow_float_refusal(spec: GpuSpec, a: NumberFormat, b: NumberFormat) -> str | None:
    """Why a GEMM whose two operands are both FP4/FP6 (plain or block-scaled) cannot run on
    this GPU (None if it can): such a GEMM needs the tensor core's own fp4/fp6 rate (Blackwell);
    a GPU without it (Hopper, Ampere) has no kernel for it -- dequantising *both* operands is
    not what any library ships. Weight-only FP4 (a 16-bit activation) runs everywhere
    (``w_only``)."""
    if not (_narrow_float(a) and _narrow_float(b)):
        return None
    want = max((tc_format_name(a), tc_format_name(b)), key=_tc_bits)
    if want in spec.tensor_core.fma_per_clock:
        return None
    return (f"no {want} tensor-core rate for a {a.name} x {b.name} GEMM on this GPU; its "
            f"tensor-core formats: {', '.join(spec.tensor_core.fma_per_clock)} (weight-only "
            f"{b.name} with a 16-bit activation format runs dequantised)")


def _float_target(spec: GpuSpec, a: NumberFormat, b: NumberFormat) -> str | None:
    """Tensor-core float format for a GEMM with at least one float operand (None: SIMT).

    The widest plain float operand sets the compute format; fp32 stays on the CUDA cores
    (PyTorch's default with TF32 off); a format without a tensor-core rate (fp8 on A100)
    falls back to fp16/bf16. FP4/FP6 x FP4/FP6 (plain or block-scaled) runs at the GPU's
    fp4/fp6 rate (Blackwell); a GPU without it refuses such a GEMM
    (:func:`narrow_float_refusal`, checked by the unit's ``supports``).
    """
    has = spec.tensor_core.fma_per_clock
    if _narrow_float(a) and _narrow_float(b):   # FP4/FP6 x FP4/FP6: its own MMA kind
        want = max((tc_format_name(a), tc_format_name(b)), key=_tc_bits)
        if want in has:
            return want
    floats = [f for f in (a, b) if f.is_float and f.kind != "block"]
    widest = max(floats, key=lambda f: f.bits) if floats else None
    if widest is not None and widest.name == "fp32":
        return None
    if widest is not None and tc_format_name(widest) in has and not _narrow_float(widest):
        return widest.name
    order = ("bf16", "fp16") if widest is not None and widest.name == "bf16" else ("fp16", "bf16")
    for name in order:
        if name in has:
            return name
    return None


def candidate_plans(spec: GpuSpec, a: NumberFormat, b: NumberFormat,
                    dequant_ops: float) -> list[MmaPlan]:
    """All plans able to run an ``a x b`` GEMM on this GPU (at least one: SIMT)."""
    tc = spec.tensor_core.fma_per_clock
    per_sm = spec.tensor_core.per_sm
    plans: list[MmaPlan] = []
    if a.is_float or b.is_float:
        target = _float_target(spec, a, b)
        if target is None:
            conv_a = 0.0 if a.name in ("fp32",) else 1.0
            conv_b = 0.0 if b.name in ("fp32",) else dequant_ops if b.is_integer else 1.0
            return [_simt(spec, conv_a, conv_b)]
        a_conv = 0.0 if tc_format_name(a) == target else 1.0
        if tc_format_name(b) == target:
            b_conv, path = 0.0, "tc"
        else:
            b_conv = dequant_ops if (b.is_integer or b.kind == "block") else 1.0
            path = "w_only" if b.bits_per_element < _tc_bits(target) else "tc"
        plans.append(MmaPlan(path, target, 1, float(per_sm * tc[target]), a_conv, b_conv,
                             _tc_bits(target)))
        return plans
    # both integer-like
    ab, bb = _ibits(a), _ibits(b)
    for f in _INT_TC:
        if f not in tc:
            continue
        fb = _tc_bits(f)
        if f == "int1":
            passes = ab * bb
            path = "bitserial" if passes > 1 else "tc"
        else:
            passes = math.ceil(ab / fb) * math.ceil(bb / fb)
            path = "tc" if passes == 1 else "digit"
        a_conv = 0.0 if ab == fb else 1.0
        b_conv = 0.0 if bb == fb else 1.0
        plans.append(MmaPlan(path, f, passes, float(per_sm * tc[f]), a_conv, b_conv, fb))
    for f in ("fp16", "bf16"):  # no integer tensor core: convert to a float MMA
        if f in tc and not plans and max(ab, bb) <= 11:
            plans.append(MmaPlan("tc", f, 1, float(per_sm * tc[f]), 1.0, 1.0, 16))
    if not plans:
        plans.append(_simt(spec, 1.0, 1.0))
    return plans


def plan_mma(spec: GpuSpec, a: NumberFormat, b: NumberFormat, dequant_ops: float,
             prefer: str = "") -> MmaPlan | None:
    """The fastest plan (fewest passes per unit rate, then fewest conversions).

    ``prefer``: a path name (``bitserial``, ``digit``) to force; None if not available.
    """
    plans = candidate_plans(spec, a, b, dequant_ops)
    if prefer:
        plans = [p for p in plans if p.path == prefer or (prefer == "bitserial" and p.tc_format == "int1")]
        if not plans:
            return None
    return min(plans, key=lambda p: (p.passes / p.rate_per_sm, p.a_convert_ops + p.b_convert_ops))


def missing_compute_format(spec: GpuSpec, fmt: NumberFormat) -> str | None:
    """Why this GPU cannot compute with activations in ``fmt`` (None: it can).

    An activation (compute) format that is a tensor-core float format (tf32, fp16, bf16, fp8)
    and has no rate in ``tensor_core.fma_per_clock`` is one the device lacks: bf16 on a V100,
    fp8 on an A100. The hardware has no datapath for it, so it is refused rather than run as
    another format. Weight-only formats are not checked here (Marlin-style dequantisation into
    the activation format is the device's own path), nor integer formats (they widen onto a
    wider integer tensor core) or fp32 (the CUDA cores).
    """
    has = spec.tensor_core.fma_per_clock
    if fmt.name not in _FLOAT_TC or fmt.name in has:
        return None
    return (f"no {fmt.name} tensor cores; it computes in {', '.join(has)} on its tensor cores "
            f"and fp32 on its CUDA cores")
