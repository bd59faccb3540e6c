"""Component classes: what each kind of block costs per action, per instance and at rest.

A class is an object registered by name in ``COMPONENT_CLASSES``.  Adding one is a
subclass of :class:`ComponentClass` plus a ``register_component_class`` call (see
``docs/energy.md``).

All CMOS figures start at 45 nm / 0.9 V (``energy.tables``) and go through
:func:`energy.scaling.scale`; DRAM figures are device figures and are not node scaled.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from archsim.energy import arith, tables
from archsim.energy.component import Technology
from archsim.energy.scaling import node_factor, scale

__all__ = [
    "ComponentClass",
    "COMPONENT_CLASSES",
    "register_component_class",
    "sram_read_64bit_pj",
]

_BASE_NODE = tables.BASE_NODE_NM
_BASE_VDD = tables.BASE_VDD_V
_UM2_PER_MM2 = 1e6


# ------------------------------------------------------------------ scaling helpers


def _energy(pj_45: float, tech: Technology) -> float:
    return scale(pj_45, "energy", _BASE_NODE, tech.node_nm, _BASE_VDD, tech.vdd_v)


def _area_mm2(um2_45: float, tech: Technology) -> float:
    return scale(um2_45, "area", _BASE_NODE, tech.node_nm) / _UM2_PER_MM2


def _leakage_w(um2_45: float, tech: Technology) -> float:
    w_45 = um2_45 / _UM2_PER_MM2 * tables.LEAKAGE_W_PER_MM2.value
    return scale(w_45, "power", _BASE_NODE, tech.node_nm, _BASE_VDD, tech.vdd_v)


# ------------------------------------------------------------------ attribute checks


def _number(attrs: Mapping[str, Any], key: str, *, minimum: float = 0.0, strict: bool = True) -> float:
    v = attrs[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v):
        raise ValueError(f"attribute {key!r}: expected a number, got {v!r}")
    if (strict and v <= minimum) or (not strict and v < minimum):
        raise ValueError(f"attribute {key!r}: expected a number {'>' if strict else '>='} {minimum:g}, got {v!r}")
    return float(v)


def _integer(attrs: Mapping[str, Any], key: str, *, minimum: int = 1) -> int:
    v = attrs[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"attribute {key!r}: expected an integer >= {minimum}, got {v!r}")
    if v < minimum:
        raise ValueError(f"attribute {key!r}: expected an integer >= {minimum}, got {v!r}")
    return v


def _text(attrs: Mapping[str, Any], key: str) -> str:
    v = attrs[key]
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"attribute {key!r}: expected a non-empty string, got {v!r}")
    return v


def _format(attrs: Mapping[str, Any]) -> arith.FormatInfo:
    try:
        return arith.resolve_format(attrs["format"])
    except ValueError as exc:
        raise ValueError(f"attribute 'format': {exc}") from None


# ------------------------------------------------------------------ contract


class ComponentClass(ABC):
    """A kind of hardware block.

    Contract:
        The caller passes ``attrs`` with every required attribute present, no unknown
        attribute, and optional ones filled with their defaults, and only actions from
        ``actions(attrs)`` (``energy.report`` guarantees this).  ``check`` raises
        ``ValueError`` (message naming the attribute and what was expected) for a bad
        value.  The implementer guarantees energy per action >= 0 pJ, area per instance
        >= 0 mm², leakage per instance >= 0 W, all deterministic functions of
        (attrs, technology), every constant taken from ``energy.tables`` with a source,
        and node changes applied only through ``energy.scaling.scale``.
    """

    name: ClassVar[str]
    required: ClassVar[tuple[str, ...]]
    optional: ClassVar[Mapping[str, Any]] = MappingProxyType({})
    fixed_actions: ClassVar[tuple[str, ...]] = ()

    def actions(self, attrs: Mapping[str, Any]) -> tuple[str, ...]:
        """Action names this component defines."""
        return self.fixed_actions

    def check(self, attrs: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Validate attribute values; raise ValueError naming the attribute (default: none)."""
        return None

    @abstractmethod
    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        """Energy of one action (pJ)."""

    @abstractmethod
    def area_mm2(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        """Area of one instance (mm²)."""

    @abstractmethod
    def leakage_w(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        """Static power of one instance (W)."""


COMPONENT_CLASSES: dict[str, ComponentClass] = {}


def register_component_class(cls_obj: ComponentClass) -> ComponentClass:
    """Register a component class instance under ``cls_obj.name``.

    Raises:
        ValueError: the name is already registered.
    """
    if cls_obj.name in COMPONENT_CLASSES:
        raise ValueError(f"component class {cls_obj.name!r} already registered")
    COMPONENT_CLASSES[cls_obj.name] = cls_obj
    return cls_obj


# ------------------------------------------------------------------ arithmetic


#: Optional attribute of the mac / vector / sram / regfile / dram classes: a multiplier on
#: the bottom-up energy per action, fitted from measured silicon energy (e.g. a GPU's
#: ``power.core_energy_scale``, see docs/gpu.md). 1.0 = the library value.
_SCALE: Mapping[str, Any] = MappingProxyType({"energy_scale": 1.0})


def _scale_of(attrs: Mapping[str, Any]) -> float:
    return _number(attrs, "energy_scale") if "energy_scale" in attrs else 1.0


class _FormatClass(ComponentClass):
    required = ("format",)
    optional: ClassVar[Mapping[str, Any]] = _SCALE

    def check(self, attrs: Mapping[str, Any]) -> None:
        _format(attrs)
        _scale_of(attrs)

    def leakage_w(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return _leakage_w(self._um2(attrs), tech)

    def area_mm2(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return _area_mm2(self._um2(attrs), tech)

    @abstractmethod
    def _um2(self, attrs: Mapping[str, Any]) -> float: ...


class MacClass(_FormatClass):
    """``mac``: one multiply-accumulate unit. Action ``mac`` = multiply + add (see energy.arith)."""

    name = "mac"
    fixed_actions = ("mac",)

    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        return _energy(arith.mac_pj(_format(attrs)), tech) * _scale_of(attrs)

    def _um2(self, attrs: Mapping[str, Any]) -> float:
        return arith.mac_um2(_format(attrs))


class MultiplierClass(_FormatClass):
    """``multiplier``: action ``op`` = one multiply."""

    name = "multiplier"
    fixed_actions = ("op",)

    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        return _energy(arith.mult_pj(_format(attrs)), tech)

    def _um2(self, attrs: Mapping[str, Any]) -> float:
        return arith.mult_um2(_format(attrs))


class AdderClass(_FormatClass):
    """``adder``: action ``op`` = one add."""

    name = "adder"
    fixed_actions = ("op",)

    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        return _energy(arith.add_pj(_format(attrs)), tech)

    def _um2(self, attrs: Mapping[str, Any]) -> float:
        return arith.add_um2(_format(attrs))


class VectorClass(_FormatClass):
    """``vector``: one SIMD/CUDA-core lane. Action ``op`` = one FMA-class ALU op.

    op = MAC of the format + 3 operand reads and 1 result write of ``bits`` from an
    8 KB register-file bank + instruction overhead (70 pJ) / 32 lanes (45 nm figures).
    Area = MAC unit + 3 operand pipeline registers of ``bits`` flip-flops.
    """

    name = "vector"
    fixed_actions = ("op",)

    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        fmt = _format(attrs)
        rf_access = sram_read_64bit_pj(tables.VECTOR_RF_BANK_BYTES.value) * fmt.bits / 64.0
        overhead = tables.INSTRUCTION_OVERHEAD_PJ.value / tables.SIMD_LANES.value
        return _energy(arith.mac_pj(fmt) + 4.0 * rf_access + overhead, tech) * _scale_of(attrs)

    def _um2(self, attrs: Mapping[str, Any]) -> float:
        fmt = _format(attrs)
        return arith.mac_um2(fmt) + 3.0 * fmt.bits * arith.cell_area_um2("dff")


# ------------------------------------------------------------------ storage


def sram_read_64bit_pj(capacity_bytes: float) -> float:
    """Energy of a 64-bit SRAM read at 45 nm (pJ) versus capacity (bytes).

    Piecewise power law through Horowitz's points (8 KB: 10 pJ, 32 KB: 20 pJ,
    1 MB: 100 pJ), linear in (log C, log E); outside them the end segments extend
    (E ~ C^0.5 below 8 KB, E ~ C^0.464 above 1 MB).  The ~sqrt(C) growth is the
    CACTI-like behaviour of bit-/word-line length ~ sqrt(array size).
    """
    pts = sorted(tables.SRAM_READ_64BIT_PJ.values.items())
    c = float(capacity_bytes)
    if c <= pts[1][0]:
        (c0, e0), (c1, e1) = pts[0], pts[1]
    else:
        (c0, e0), (c1, e1) = pts[1], pts[2]
    slope = math.log(e1 / e0) / math.log(c1 / c0)
    return e0 * (c / c0) ** slope


class _ArrayClass(ComponentClass):
    required = ("capacity_bytes", "width_bits")
    optional: ClassVar[Mapping[str, Any]] = MappingProxyType({"ports": 1, "energy_scale": 1.0})
    fixed_actions = ("read", "write")
    cell_factor: ClassVar[float] = 1.0
    efficiency: ClassVar[float] = 1.0

    def check(self, attrs: Mapping[str, Any]) -> None:
        _number(attrs, "capacity_bytes")
        _integer(attrs, "width_bits")
        _integer(attrs, "ports")
        _scale_of(attrs)

    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        # read and write cost the same (Horowitz gives reads; CACTI writes are within ~20%).
        # Per-access energy grows ~linearly with ports (longer word/bit lines; Rixner et al.,
        # HPCA 2000).
        e64 = sram_read_64bit_pj(attrs["capacity_bytes"])
        return _energy(e64 * attrs["width_bits"] / 64.0 * attrs["ports"], tech) * _scale_of(attrs)

    def _um2(self, attrs: Mapping[str, Any]) -> float:
        # area ~ ports² (one extra word line and bit line per port; Rixner et al., HPCA 2000)
        bits = attrs["capacity_bytes"] * 8.0
        cell = tables.SRAM_CELL_UM2.value * self.cell_factor
        return bits * cell / self.efficiency * attrs["ports"] ** 2

    def area_mm2(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return _area_mm2(self._um2(attrs), tech)

    def leakage_w(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return _leakage_w(self._um2(attrs), tech)


class SramClass(_ArrayClass):
    """``sram``: actions ``read``/``write`` of ``width_bits``; 6T cell / 0.6 array efficiency."""

    name = "sram"
    cell_factor = 1.0
    efficiency = tables.SRAM_ARRAY_EFFICIENCY.value


class RegfileClass(_ArrayClass):
    """``regfile``: like ``sram`` (same energy law), 2x cell area, 0.5 array efficiency."""

    name = "regfile"
    cell_factor = tables.REGFILE_CELL_FACTOR.value
    efficiency = tables.REGFILE_ARRAY_EFFICIENCY.value


class LutClass(ComponentClass):
    """``lut``: a register table read through a mux tree.

    lookup = activity x entry_bits x (entries - 1) x E(mux2);  write = entry_bits x E(dff);
    area = entries x entry_bits x A(dff) + entry_bits x (entries - 1) x A(mux2).
    """

    name = "lut"
    required = ("entries", "entry_bits")
    fixed_actions = ("lookup", "write")

    def check(self, attrs: Mapping[str, Any]) -> None:
        _integer(attrs, "entries", minimum=2)
        _integer(attrs, "entry_bits")

    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        n, w = attrs["entries"], attrs["entry_bits"]
        if action == "lookup":
            pj = tables.LUT_MUX_ACTIVITY.value * w * (n - 1) * arith.cell_energy_pj("mux2")
        else:
            pj = w * arith.cell_energy_pj("dff")
        return _energy(pj, tech)

    def _um2(self, attrs: Mapping[str, Any]) -> float:
        n, w = attrs["entries"], attrs["entry_bits"]
        return n * w * arith.cell_area_um2("dff") + w * (n - 1) * arith.cell_area_um2("mux2")

    def area_mm2(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return _area_mm2(self._um2(attrs), tech)

    def leakage_w(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return _leakage_w(self._um2(attrs), tech)


# ------------------------------------------------------------------ off-chip memory


class DramClass(ComponentClass):
    """``dram``: device energy; not node scaled; no die area or leakage (off-chip).

    read/write: pJ per **byte** (= 8 x pJ/bit, core + on-die movement + I/O, including
    the source's average activation share); activate: one row activation (pJ);
    mac: one in-bank PIM MAC (pJ).  Background/refresh power: model with ``static``.
    """

    name = "dram"
    required = ("tech",)
    optional: ClassVar[Mapping[str, Any]] = _SCALE
    fixed_actions = ("read", "write", "activate", "mac")

    def check(self, attrs: Mapping[str, Any]) -> None:
        if attrs["tech"] not in tables.DRAM_TECHS:
            raise ValueError(
                f"attribute 'tech': unknown DRAM technology {attrs['tech']!r}; "
                f"allowed: {', '.join(tables.DRAM_TECHS)}"
            )
        _scale_of(attrs)

    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        row = tables.DRAM_TECHS[attrs["tech"]]
        vdd = float(row["core_vdd_v"])
        if action in ("read", "write"):
            return float(row["pj_per_bit"]) * 8.0 * _scale_of(attrs)
        if action == "activate":
            return (
                tables.DRAM_ACT_PJ_PER_ROW_BIT.value
                * float(row["row_bytes"])
                * 8.0
                * (vdd / tables.DRAM_ACT_REF_VDD_V) ** 2
            )
        mac = arith.mac_pj(arith.resolve_format(tables.PIM_MAC_FORMAT))
        return mac * (vdd / _BASE_VDD) ** 2

    def area_mm2(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return 0.0

    def leakage_w(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return 0.0


# ------------------------------------------------------------------ interconnect


class WireClass(ComponentClass):
    """``wire``: action ``transfer`` = one ``width_bits`` word over ``length_mm``.

    E = activity x C_wire x V² per bit per mm (0.5 x 0.2 pF/mm x 0.81 V² = 0.081
    pJ/bit/mm at 0.9 V).  Wire capacitance per mm is nearly node independent, so only
    the supply changes with the technology.  Area and leakage: 0 (routed over logic;
    repeaters not modelled).
    """

    name = "wire"
    required = ("length_mm", "width_bits")
    fixed_actions = ("transfer",)

    def check(self, attrs: Mapping[str, Any]) -> None:
        _number(attrs, "length_mm", strict=False)
        _integer(attrs, "width_bits")

    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        v = tech.effective_vdd_v
        per_bit_mm = tables.WIRE_ACTIVITY.value * tables.WIRE_CAP_PF_PER_MM.value * v * v
        return per_bit_mm * attrs["width_bits"] * float(attrs["length_mm"])

    def area_mm2(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return 0.0

    def leakage_w(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return 0.0


# ------------------------------------------------------------------ paper figures


class FixedClass(ComponentClass):
    """``fixed``: a block known only from a paper's figures.

    attrs: energy_pj {action: pJ}, area_mm2, leakage_w, source (non-empty), optional
    node_nm (the figures' node; when set and different from the technology, energy,
    area and leakage are scaled with ``scale``; None = use the figures as given).
    """

    name = "fixed"
    required = ("energy_pj", "area_mm2", "leakage_w", "source")
    optional: ClassVar[Mapping[str, Any]] = MappingProxyType({"node_nm": None})

    def actions(self, attrs: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(attrs["energy_pj"])

    def check(self, attrs: Mapping[str, Any]) -> None:
        e = attrs["energy_pj"]
        if not isinstance(e, Mapping):
            raise ValueError(f"attribute 'energy_pj': expected a mapping action -> pJ, got {e!r}")
        for action, pj in e.items():
            if not isinstance(action, str) or not action:
                raise ValueError(f"attribute 'energy_pj': action names must be non-empty strings, got {action!r}")
            if isinstance(pj, bool) or not isinstance(pj, (int, float)) or not (pj >= 0) or math.isinf(pj):
                raise ValueError(f"attribute 'energy_pj': {action!r} expected a number >= 0 pJ, got {pj!r}")
        _number(attrs, "area_mm2", strict=False)
        _number(attrs, "leakage_w", strict=False)
        _text(attrs, "source")
        if attrs["node_nm"] is not None:
            _number(attrs, "node_nm")
            node_factor("area", attrs["node_nm"])  # range check

    def _scaled(self, value: float, quantity: str, attrs: Mapping[str, Any], tech: Technology) -> float:
        node = attrs["node_nm"]
        if node is None:
            return float(value)
        vdd = tech.vdd_v if quantity != "area" else None
        return scale(value, quantity, node, tech.node_nm, None, vdd)

    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        return self._scaled(attrs["energy_pj"][action], "energy", attrs, tech)

    def area_mm2(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return self._scaled(attrs["area_mm2"], "area", attrs, tech)

    def leakage_w(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return self._scaled(attrs["leakage_w"], "power", attrs, tech)


class StaticClass(ComponentClass):
    """``static``: constant power (board, uncore, DRAM background); no actions, no area."""

    name = "static"
    required = ("power_w", "source")

    def check(self, attrs: Mapping[str, Any]) -> None:
        _number(attrs, "power_w", strict=False)
        _text(attrs, "source")

    def energy_pj(self, attrs: Mapping[str, Any], action: str, tech: Technology) -> float:
        raise AssertionError("static components have no actions")  # pragma: no cover

    def area_mm2(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return 0.0

    def leakage_w(self, attrs: Mapping[str, Any], tech: Technology) -> float:
        return float(attrs["power_w"])


for _c in (
    MacClass(),
    MultiplierClass(),
    AdderClass(),
    VectorClass(),
    SramClass(),
    RegfileClass(),
    LutClass(),
    DramClass(),
    WireClass(),
    FixedClass(),
    StaticClass(),
):
    register_component_class(_c)
