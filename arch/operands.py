"""Operand-format checks of units whose multipliers are built for one number format.

A spatial array's PEs, an FPGA's MAC lanes and a PIM device's bank units each multiply in
one fixed format (``mac_format``). An operand fits such a multiplier when it has no more
bits and, if it is a floating-point format, the multiplier is a floating-point one too
(an integer operand no wider than the multiplier is exact on it; a float operand needs
an exponent datapath). ``supports(op)`` of those families reports the first operand that
does not fit, in one wording.
"""

from __future__ import annotations

from collections.abc import Iterable

from archsim.workloads.formats import NumberFormat
from archsim.workloads.ops import Attention, FusedMoE

__all__ = ["operand_fits", "operand_width_problem", "fused_attention_problem"]


def operand_fits(fmt: NumberFormat, hw: NumberFormat) -> bool:
    """True when an operand in ``fmt`` runs on a multiplier built for ``hw``.

    Args:
        fmt: the operand's number format.
        hw: the multiplier's number format.
    """
    return fmt.bits <= hw.bits and (hw.is_float or not fmt.is_float)


def operand_width_problem(operands: Iterable[tuple[str, NumberFormat]], hw: NumberFormat,
                          where: str) -> str | None:
    """Why the operands cannot run on the multiplier, or None when they all fit.

    Args:
        operands: ``(role, format)`` pairs in the order to check, e.g.
            ``(("activation", op.a_format), ("weight", op.w_format))``.
        hw: the multiplier's number format.
        where: the multiplier as the message names it, e.g. ``"the PE's int8 multiplier"``.

    Returns:
        ``"<role> format <name> is wider than <where>"`` for the first operand that does
        not fit (:func:`operand_fits`), else None.
    """
    for role, fmt in operands:
        if not operand_fits(fmt, hw):
            return f"{role} format {fmt.name} is wider than {where}"
    return None


def fused_attention_problem(op: object, kind: str) -> str | None:
    """The reason a unit without a fused-attention kernel refuses a ``workloads.ops.Attention``
    op (None for any other op). Such units run attention as its QK GEMM, softmax and AV GEMM
    (``archsim.workload(..., attention="unfused")``, the zoo's default for them). A
    ``workloads.ops.FusedMoE`` (a GPU serving kernel) is refused the same way: such units
    run the routed experts as separate GEMMs (the zoo's default, no ``moe_routing``)."""

    if isinstance(op, Attention):
        return (f"a {kind} unit has no fused attention kernel; build the model with "
                f"attention='unfused' (QK GEMM, softmax, AV GEMM)")
    if isinstance(op, FusedMoE):
        return (f"a {kind} unit has no fused MoE kernel; build the model without "
                f"moe_routing (the routed experts as separate GEMMs)")
    return None
