"""Arithmetic-unit models at 45 nm, 0.9 V: energy (pJ) and area (um²) per format.

All figures are derived from the Horowitz (ISSCC 2014) tables in ``energy.tables``
with the following documented rules (node scaling happens elsewhere):

* **Integer adder**: linear in width, from the nearest tabulated width (8/16/32 b).
* **Integer multiplier**: proportional to width², from the nearest tabulated width
  (8/32 b).  (The rule predicts 3.2 pJ for 32 b from the 8 b figure; table: 3.1 pJ.)
* **Float multiplier**: ``a m² + b w`` with ``m`` the significand width (incl. hidden
  bit) and ``w`` the datapath width: a significand array plus exponent/normalise/round
  logic, fitted exactly through the fp16 and fp32 table points.
* **Float adder**: linear in datapath width from the nearest tabulated width (16/32 b).
* **Binary (int1)**: multiply = one XNOR, accumulate = one full adder of the popcount
  tree per input bit.  A standard cell's energy is taken as the full-adder energy
  (8-bit adder / 8) scaled by cell area (switched capacitance ~ area).
* **Ternary**: modelled as a 2-bit integer datapath (sign select + add).
* **Block (MX) formats**: the element format's unit; the multiplier also pays the
  shared-scale exponent add (an 8-bit integer add) amortised over the block (32).

A MAC is one multiply plus one add in the same format.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from archsim.energy import tables
from archsim.workloads.formats import (  # the one repo import (a lower layer)
    format_names,
    get_format,
)

__all__ = [
    "FormatInfo",
    "known_formats",
    "resolve_format",
    "cell_energy_pj",
    "cell_area_um2",
    "mult_pj",
    "add_pj",
    "mult_um2",
    "add_um2",
    "mac_pj",
    "mac_um2",
]


@dataclass(frozen=True)
class FormatInfo:
    """What the arithmetic models need to know about a number format.

    Attributes:
        name: format name (as in ``workloads.formats``).
        kind: 'float' | 'int' | 'binary' | 'ternary' | 'block'.
        bits: storage bits per element.
        arith_bits: datapath width of one operand.
        significand_bits: float significand incl. hidden bit (0 for non-floats).
        element: element format name for block formats, else ''.
        block_size: elements per shared scale (block formats), else 1.
        scale_bits: shared-scale width (block formats), else 0.
    """

    name: str
    kind: str
    bits: int
    arith_bits: int
    significand_bits: int = 0
    element: str = ""
    block_size: int = 1
    scale_bits: int = 0


def known_formats() -> tuple[str, ...]:
    """Format names with an arithmetic model (sorted)."""
    return tuple(sorted({*tables.FLOAT_FORMATS, *tables.INT_FORMATS, *tables.BLOCK_FORMATS}))


def _own_format(name: str) -> FormatInfo | None:
    if name in tables.FLOAT_FORMATS:
        f = tables.FLOAT_FORMATS[name]
        return FormatInfo(name, "float", int(f["bits"]), int(f["arith_bits"]), int(f["significand_bits"]))
    if name in tables.INT_FORMATS:
        f = tables.INT_FORMATS[name]
        return FormatInfo(name, str(f["kind"]), int(f["bits"]), int(f["bits"]))
    if name in tables.BLOCK_FORMATS:
        f = tables.BLOCK_FORMATS[name]
        elem = _own_format(str(f["element"]))
        assert elem is not None, f"block format {name}: element {f['element']} missing from tables"
        return FormatInfo(
            name,
            "block",
            int(f["bits"]),
            elem.arith_bits,
            elem.significand_bits,
            str(f["element"]),
            int(f["block_size"]),
            int(f["scale_bits"]),
        )
    return None


def _from_workloads(name: str) -> FormatInfo | None:
    """Generic model for a format only ``workloads.formats`` knows (integer-like only)."""
    if name not in format_names():
        return None
    fmt = get_format(name)
    kind = str(fmt.kind)
    bits = int(fmt.bits)
    if kind == "int":
        return FormatInfo(name, "int", bits, bits)
    if kind == "binary":
        return FormatInfo(name, "binary", bits, 1)
    if kind == "ternary":
        return FormatInfo(name, "ternary", bits, 2)
    return None


def resolve_format(fmt: Any) -> FormatInfo:
    """Format name (or an object with ``.name``) -> :class:`FormatInfo`.

    Own table first (it knows significand widths); integer/binary/ternary formats known
    only to ``workloads.formats`` get the generic model.

    Raises:
        ValueError: no arithmetic model for the format (message lists the known names).
    """
    name = fmt if isinstance(fmt, str) else getattr(fmt, "name", None)
    if not isinstance(name, str):
        raise ValueError(f"format must be a format name string, got {fmt!r}; allowed: {', '.join(known_formats())}")
    name = name.lower()
    info = _own_format(name) or _from_workloads(name)
    if info is None:
        raise ValueError(f"unknown format {name!r}; allowed: {', '.join(known_formats())}")
    return info


# ------------------------------------------------------------------ standard cells


def _full_adder_pj() -> float:
    return tables.INT_ADD_PJ.values[8] / 8.0


def cell_energy_pj(cell: str) -> float:
    """Energy of one switching standard cell at 45 nm: FA energy x cell area / FA area."""
    return _full_adder_pj() * tables.CELL_UM2[cell].value / tables.CELL_UM2["full_adder"].value


def cell_area_um2(cell: str) -> float:
    """Area of a standard cell at 45 nm (NanGate FreePDK45 X1 footprint)."""
    return tables.CELL_UM2[cell].value


# ------------------------------------------------------------------ width rules


def _nearest(table: dict[int, float] | Any, width: float) -> int:
    """Tabulated width nearest to ``width`` in log distance (ties: the smaller)."""
    keys = sorted(table)
    return min(keys, key=lambda k: (abs(math.log(width / k)), k))


def _linear(table: Any, width: float) -> float:
    k = _nearest(table, width)
    return table[k] * width / k


def _square(table: Any, width: float) -> float:
    k = _nearest(table, width)
    return table[k] * (width / k) ** 2


def _fp_mult_fit(table: Any) -> tuple[float, float]:
    """Solve a m² + b w = E through the fp16 (m=11, w=16) and fp32 (m=24, w=32) points."""
    m1, w1, e1 = 11.0, 16.0, table[16]
    m2, w2, e2 = 24.0, 32.0, table[32]
    det = m1 * m1 * w2 - m2 * m2 * w1
    a = (e1 * w2 - e2 * w1) / det
    b = (m1 * m1 * e2 - m2 * m2 * e1) / det
    return a, b


def _fp_mult(table: Any, info: FormatInfo) -> float:
    a, b = _fp_mult_fit(table)
    return a * info.significand_bits**2 + b * info.arith_bits


def _element(info: FormatInfo) -> FormatInfo:
    return resolve_format(info.element)


def _op(info: FormatInfo, op: str, energy: bool) -> float:
    """One multiply ('mult') or add ('add') of the format at 45 nm, pJ or um²."""
    if info.kind == "block":
        elem = _element(info)
        if op != "mult":
            return _op(elem, op, energy)
        # the product's scale is the sum of the two shared exponents: one scale_bits-wide
        # integer add per block, amortised over the block's elements
        scale = _linear(tables.INT_ADD_PJ.values if energy else tables.INT_ADD_UM2.values, info.scale_bits)
        return _op(elem, op, energy) + scale / info.block_size
    if info.kind == "binary":
        cell = "xnor2" if op == "mult" else "full_adder"
        return cell_energy_pj(cell) if energy else cell_area_um2(cell)
    if info.kind in ("int", "ternary"):
        if op == "mult":
            return _square(tables.INT_MULT_PJ.values if energy else tables.INT_MULT_UM2.values, info.arith_bits)
        return _linear(tables.INT_ADD_PJ.values if energy else tables.INT_ADD_UM2.values, info.arith_bits)
    if info.kind == "float":
        if op == "mult":
            return _fp_mult(tables.FP_MULT_PJ.values if energy else tables.FP_MULT_UM2.values, info)
        return _linear(tables.FP_ADD_PJ.values if energy else tables.FP_ADD_UM2.values, info.arith_bits)
    raise ValueError(f"no arithmetic model for format kind {info.kind!r}")  # pragma: no cover


def mult_pj(info: FormatInfo) -> float:
    """Energy of one multiply at 45 nm, 0.9 V (pJ)."""
    return _op(info, "mult", True)


def add_pj(info: FormatInfo) -> float:
    """Energy of one add at 45 nm, 0.9 V (pJ)."""
    return _op(info, "add", True)


def mult_um2(info: FormatInfo) -> float:
    """Area of one multiplier at 45 nm (um²)."""
    return _op(info, "mult", False)


def add_um2(info: FormatInfo) -> float:
    """Area of one adder at 45 nm (um²)."""
    return _op(info, "add", False)


def mac_pj(info: FormatInfo) -> float:
    """Energy of one multiply-accumulate (multiply + add, same format) at 45 nm (pJ)."""
    return mult_pj(info) + add_pj(info)


def mac_um2(info: FormatInfo) -> float:
    """Area of one MAC unit (multiplier + adder) at 45 nm (um²)."""
    return mult_um2(info) + add_um2(info)
