"""Accelergy's job done by archsim's energy library: a Timeloop architecture priced per action.

Timeloop takes an energy reference table (ERT: component -> action -> pJ) that Accelergy
derives from each component's class and attributes. :func:`derive_ert` derives it from
:mod:`energy.classes` instead, by class and attributes (``width``, ``depth``, ``datawidth``,
``nports``, ``multiplier_width``/``adder_width``, DRAM ``type``, ``technology``):

========================================  ==============================================
Timeloop/Accelergy class                  archsim energy class (per Timeloop action)
========================================  ==============================================
``DRAM``                                  ``dram`` (``type``): read/write/update of one
                                          ``width``-bit block = pJ/byte x width/8
``SRAM``, ``smartbuffer_SRAM``            ``sram`` (capacity = depth x width / 8 bytes,
                                          ``width_bits`` = width, ``ports`` = nports)
``regfile``, ``smartbuffer_RF``,          ``lut``: a flip-flop table read through a
``aladdin_register``, ``register``        (depth-1)-mux tree per bit; write = width DFFs
``intmac``/``mac``/``int_mac``            ``multiplier`` (int ``multiplier_width``) +
                                          ``adder`` (int ``adder_width``)
``fpmac``                                 ``multiplier`` + ``adder`` of fp ``datawidth``
========================================  ==============================================

``technology`` (``"65nm"``) is the node of every on-chip component (scaled by
:func:`energy.scaling.scale` inside the classes); DRAM is a device figure, not node scaled.
``n_banks`` does not change the per-access energy: the SRAM law (Horowitz's 8 KB-1 MB
macros) is already that of internally banked macros. ``leak`` (pJ per cycle per instance)
needs a clock: it is the class's leakage x ``global_cycle_seconds`` when the architecture
gives that attribute, else 0 (no clock is invented). Every value carries its source.
A class archsim cannot price raises one :class:`ConfigError` naming it and the file:line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsim.energy import (
    Component,
    Technology,
    area_per_instance_mm2,
    energy_per_action_pj,
    leakage_per_instance_w,
    scale,
)
from archsim.energy.arith import cell_area_um2
from archsim.energy.tables import BASE_NODE_NM, DRAM_TECHS
from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.yamlio import line_of

__all__ = ["ErtEntry", "DerivedErt", "derive_ert", "iter_components"]

_SRAM = {"SRAM", "smartbuffer_SRAM"}
_FLOPS = {"regfile", "smartbuffer_RF", "aladdin_register", "register"}
_INT_MACS = {"intmac", "mac", "int_mac", "intmac_v2"}
_FP_MACS = {"fpmac"}
_PJ_PER_J = 1e12


@dataclass(frozen=True)
class ErtEntry:
    """One component's derived energies.

    Attributes:
        name: the component's name in the architecture.
        timeloop_class: its class (``subclass`` when the class is ``storage``).
        energy_pj: action -> pJ (Timeloop's actions: read/write/update/leak or compute/leak).
        area_mm2: area of one instance (mm²).
        source: one line: the archsim class, its attributes and the node.
        where: ``file:line`` of the component.
    """

    name: str
    timeloop_class: str
    energy_pj: Mapping[str, float]
    area_mm2: float
    source: str
    where: str


@dataclass(frozen=True)
class DerivedErt:
    """The ERT of one architecture, derived by the energy library (:func:`derive_ert`)."""

    entries: tuple[ErtEntry, ...]

    def energies(self) -> dict[str, dict[str, float]]:
        """Component -> action -> pJ, the shape :func:`arch.timeloop.reader.read_ert` returns."""
        return {e.name: dict(e.energy_pj) for e in self.entries}

    def table_text(self) -> str:
        """The table ``--show-ert`` prints: component, class, action, pJ, area and source."""
        out = ["Energy reference table (derived by archsim's energy library; --ert overrides)",
               f"{'component':22s} {'class':18s} {'action':8s} {'pJ':>12s} {'area mm2':>10s}  "
               "source"]
        for e in self.entries:
            for i, (act, pj) in enumerate(e.energy_pj.items()):
                area = f"{e.area_mm2:10.6f}" if i == 0 else " " * 10
                src = f"{e.source} ({e.where})" if i == 0 else ""
                out.append(f"{e.name:22s} {e.timeloop_class:18s} {act:8s} {pj:12.6f} {area}  "
                           f"{src}".rstrip())
        return "\n".join(out)


def iter_components(doc: Mapping[str, Any]) -> Iterator[tuple[Any, dict[str, Any], str]]:
    """Every ``!Component`` of a v0.4 architecture document, in order, with its attributes
    (inherited from the containers above it, then its own) and its key path."""
    inherited: dict[str, Any] = {}

    def walk(nodes: list[Any], where: str) -> Iterator[tuple[Any, dict[str, Any], str]]:
        nonlocal inherited
        for i, node in enumerate(nodes):
            w = f"{where}[{i}]"
            tag = node.get("!tag") if isinstance(node, dict) else None
            if tag in ("Parallel", "Hierarchical"):
                yield from walk(list(node.get("nodes", [])), f"{w}.nodes")
                continue
            if tag not in ("Container", "Component"):
                continue
            attrs = dict(inherited)
            attrs.update(node.get("attributes", {}) or {})
            if tag == "Container":
                inherited = attrs
            else:
                yield node, attrs, w

    yield from walk(list(doc["architecture"]["nodes"]), "architecture.nodes")


def _technology(attrs: Mapping[str, Any], name: str, file: str, line: int | None) -> Technology:
    raw = attrs.get("technology")
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(nm)?\s*", str(raw)) if raw is not None else None
    if m is None:
        raise ConfigError(Problem(f"component {name!r}: expected a 'technology' attribute "
                                  f"like 45nm to price it, got {raw!r}",
                                  f"{name}.attributes.technology", file, line))
    try:
        return Technology(node_nm=float(m.group(1)))
    except ValueError as exc:
        raise ConfigError(Problem(f"component {name!r}: {exc}",
                                  f"{name}.attributes.technology", file, line)) from None


def _int(attrs: Mapping[str, Any], key: str, name: str, file: str, line: int | None,
         default: Any = None) -> int:
    v = attrs.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 1 or int(v) != v:
        raise ConfigError(Problem(f"component {name!r}: expected a positive integer to price "
                                  f"it, got {v!r}", f"{name}.attributes.{key}", file, line))
    return int(v)


def _price(cls: str, attrs: Mapping[str, Any], name: str, file: str, line: int | None
           ) -> tuple[dict[str, float], float, str]:
    """(action -> pJ, area mm² per instance, source) of one component."""
    priced = {"DRAM"} | _SRAM | _FLOPS | _INT_MACS | _FP_MACS
    if cls not in priced:
        raise ConfigError(Problem(f"archsim cannot price component class {cls!r} (priced: "
                                  f"{', '.join(sorted(priced))}); pass --ert",
                                  f"{name}.class", file, line))
    if cls == "DRAM":
        kind = str(attrs.get("type", "")).lower()
        if kind not in DRAM_TECHS:
            raise ConfigError(Problem(f"DRAM {name!r}: expected a 'type' among "
                                      f"{', '.join(t.upper() for t in DRAM_TECHS)}, got "
                                      f"{attrs.get('type')!r}", f"{name}.attributes.type",
                                      file, line))
        width = _int(attrs, "width", name, file, line, attrs.get("datawidth"))
        dram = Component(name, "dram", attrs={"tech": kind})
        block = energy_per_action_pj(dram, "read") * width / 8.0
        return ({"read": block, "write": block, "update": block, "leak": 0.0}, 0.0,
                f"dram {kind} x {width} b per block (energy.tables.DRAM_TECHS)")
    tech = _technology(attrs, name, file, line)
    node = f"{tech.node_nm:g} nm"
    if cls in _INT_MACS or cls in _FP_MACS:
        if cls in _FP_MACS:
            bits = _int(attrs, "datawidth", name, file, line)
            mult = add = f"fp{bits}"
        else:
            mult = f"int{_int(attrs, 'multiplier_width', name, file, line, attrs.get('datawidth'))}"
            add = f"int{_int(attrs, 'adder_width', name, file, line, attrs.get('datawidth'))}"
        parts = [Component(f"{name}.mult", "multiplier", attrs={"format": mult}),
                 Component(f"{name}.add", "adder", attrs={"format": add})]
        try:
            pj = sum(energy_per_action_pj(c, "op", tech) for c in parts)
        except ValueError as exc:
            raise ConfigError(Problem(f"component {name!r}: {exc}", f"{name}.attributes",
                                      file, line)) from None
        return ({"compute": pj, "leak": _leak(parts, attrs, tech)},
                sum(area_per_instance_mm2(c, tech) for c in parts),
                f"multiplier {mult} + adder {add} at {node}")
    width = _int(attrs, "width", name, file, line, attrs.get("datawidth"))
    depth = _int(attrs, "depth", name, file, line)
    if cls in _SRAM:
        ports = _int(attrs, "nports", name, file, line, 1)
        c = Component(name, "sram", attrs={"capacity_bytes": depth * width / 8.0,
                                           "width_bits": width, "ports": ports})
        e = energy_per_action_pj(c, "read", tech)
        return ({"read": e, "write": e, "update": e, "leak": _leak([c], attrs, tech)},
                area_per_instance_mm2(c, tech),
                f"sram {depth * width // 8} B x {width} b, {ports} port(s) at {node}")
    # a depth-1 register is read without a mux (its outputs are wired to the consumer)
    c = Component(name, "lut", attrs={"entries": max(depth, 2), "entry_bits": width})
    read = energy_per_action_pj(c, "lookup", tech) if depth > 1 else 0.0
    write = energy_per_action_pj(c, "write", tech)
    area = area_per_instance_mm2(c, tech) if depth > 1 else \
        scale(width * cell_area_um2("dff"), "area", BASE_NODE_NM, tech.node_nm) / 1e6
    return ({"read": read, "write": write, "update": write,
             "leak": _leak([c], attrs, tech) if depth > 1 else 0.0}, area,
            f"lut (flip-flops + mux tree) {depth} x {width} b at {node}")


def _leak(parts: list[Component], attrs: Mapping[str, Any], tech: Technology) -> float:
    """Leakage energy per cycle (pJ): leakage power x ``global_cycle_seconds``, or 0."""
    period = attrs.get("global_cycle_seconds")
    if not isinstance(period, (int, float)) or isinstance(period, bool) or period <= 0:
        return 0.0
    return sum(leakage_per_instance_w(c, tech) for c in parts) * float(period) * _PJ_PER_J


def derive_ert(doc: Mapping[str, Any], file: str | Path) -> DerivedErt:
    """Price every component of a Timeloop v0.4 architecture document with the energy library.

    Args:
        doc: the loaded architecture YAML (``architecture: {nodes: ...}``).
        file: its path, for error locations.

    Raises:
        ConfigError: a component class archsim cannot price, or a missing/bad attribute it
            needs (naming the component and the file:line).
    """
    f = str(file)
    entries = []
    for node, attrs, _w in iter_components(doc):
        name = str(node.get("name", ""))
        cls = str(node.get("class", ""))
        if cls == "storage" and node.get("subclass"):
            cls = str(node["subclass"])
        line = line_of(node, "class")
        energy, area, source = _price(cls, attrs, name, f, line)
        entries.append(ErtEntry(name, cls, energy, area, source, f"{Path(f).name}:{line}"))
    return DerivedErt(tuple(entries))
