"""ZigZag inputs read into archsim: the accelerator YAML and the mapping YAML.

ZigZag (KU Leuven MICAS, Mei et al., "ZigZag: Enlarging Joint Architecture-Mapping Design
Space Exploration for DNN Accelerators", IEEE TC 2021) describes an accelerator as

* ``memories``: one entry per memory, innermost first, each with ``size`` (bits),
  ``r_bw``/``w_bw`` (bits per cycle), ``r_cost``/``w_cost`` (pJ per ``r_bw``/``w_bw``-bit
  access), ``area``, ports, ``operands`` it holds (``I1``, ``I2``, ``O``) and
  ``served_dimensions`` (``[]``: one instance per PE; every array dimension: one instance
  shared by the whole array);
* ``operational_array``: ``unit_energy`` (pJ per MAC), ``unit_area``, ``dimensions``
  (``[D1, D2]``) and their ``sizes``;

and a mapping file as a list of entries (``name``: a layer name, an op type such as
``Conv``/``Gemm``, or ``default``) with ``spatial_mapping`` (per array dimension the layer
dimension unrolled on it and the factor, ``D1: [K, 32]``) and ``memory_operand_links``
(layer operand -> memory operand, ``W: I2``).

This module is archsim's own reader of that format (no ZigZag code): the memories become a
:class:`dataflow.hierarchy.Hierarchy` chain in which each level keeps exactly the operands
it serves (the rest bypass it) and the array is a network-only fan-out level (``D1`` on X,
the other dimensions on Y) between the per-PE memories and the shared ones; a mapping entry
becomes the fixed spatial factors of that fan-out level. What is not read is one error that
names the file, line and key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archsim.dataflow.hierarchy import ComputeLevel, Hierarchy, StorageLevel
from archsim.dataflow.nest import Constraints, LevelConstraint
from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.yamlio import LocDict, LocList, line_of, load_yaml

__all__ = ["ZigzagMemory", "ZigzagAccelerator", "ZigzagMappingEntry", "read_accelerator",
           "read_mapping", "hierarchy", "ARRAY_LEVEL", "LAYER_DIMS", "LAYER_OPERANDS",
           "DEFAULT_PRECISION"]

#: Name of the network-only level where the operational array fans out.
ARRAY_LEVEL = "operational_array"
#: ZigZag layer dimension -> archsim Einsum dimension, per Einsum kind
#: (``dataflow.einsum.conv2d``: P output width pairs with R; ``gemm``: Z[M,N] += A[M,K] B[K,N]).
LAYER_DIMS = {
    "conv2D": {"K": "M", "C": "C", "OX": "P", "OY": "Q", "FX": "R", "FY": "S", "B": "N",
               "G": "G"},
    "gemm": {"B": "M", "K": "N", "C": "K"},
}
#: ZigZag layer operand -> archsim data space, per Einsum kind.
LAYER_OPERANDS = {"conv2D": {"W": "Weights", "I": "Inputs", "O": "Outputs"},
                  "gemm": {"W": "B", "I": "A", "O": "Z"}}
#: ZigZag's default operand precisions (bits) of an ONNX layer: 8-bit weights and inputs,
#: 16-bit partial sums (its ``O``; the final 8-bit output is not separated here).
DEFAULT_PRECISION = {"W": 8, "I": 8, "O": 16}

_MEMORY_KEYS = {"size", "r_bw", "w_bw", "r_cost", "w_cost", "area", "r_port", "w_port",
                "rw_port", "latency", "operands", "ports", "served_dimensions",
                "min_r_granularity", "min_w_granularity", "auto_cost_extraction"}
_MEMORY_REQUIRED = ("size", "r_cost", "w_cost", "operands", "served_dimensions")
_PORT_TYPES = ("read", "write", "read_write")
_ARRAY_KEYS = {"unit_energy", "unit_area", "dimensions", "sizes"}
_TOP_KEYS = {"name", "memories", "operational_array"}
_MAPPING_KEYS = {"name", "spatial_mapping", "memory_operand_links", "temporal_ordering"}


@dataclass(frozen=True)
class ZigzagMemory:
    """One ZigZag memory (units in the names: bits, bits/cycle, pJ per access)."""

    name: str
    size_bits: float
    r_bw_bits: float
    w_bw_bits: float
    r_cost_pj: float
    w_cost_pj: float
    area: float
    operands: tuple[str, ...]
    per_pe: bool
    line: int | None = None
    shared_rw: bool = False
    #: bits of the access ``r_cost`` / ``w_cost`` price (0: ``r_bw`` / ``w_bw``)
    r_access_bits: float = 0.0
    w_access_bits: float = 0.0


@dataclass(frozen=True)
class ZigzagAccelerator:
    """A ZigZag accelerator: memories innermost first and the operational array."""

    name: str
    memories: tuple[ZigzagMemory, ...]
    unit_energy_pj: float
    unit_area: float
    dimensions: tuple[str, ...]
    sizes: tuple[int, ...]
    file: str

    @property
    def macs(self) -> int:
        """MAC units in the operational array."""
        return math.prod(self.sizes)


@dataclass(frozen=True)
class ZigzagMappingEntry:
    """One entry of a ZigZag mapping file."""

    name: str
    spatial: dict[str, tuple[tuple[str, int], ...]]
    links: dict[str, str]
    temporal_ordering: bool = False
    file: str = ""
    line: int | None = None
    problems: tuple[Problem, ...] = field(default=())


def _num(raw: Any, key: str, where: str, file: str, problems: list[Problem],
         minimum: float = 0.0) -> float:
    v = raw.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < minimum:
        problems.append(Problem(f"expected a number >= {minimum:g}, got {v!r}",
                                f"{where}.{key}", file, line_of(raw, key)))
        return 0.0
    return float(v)


def _unknown(raw: LocDict, allowed: set[str], where: str, file: str,
             problems: list[Problem]) -> None:
    for k in raw:
        if k not in allowed:
            problems.append(Problem(f"unknown key {k!r} (expected one of "
                                    f"{', '.join(sorted(allowed))})", f"{where}.{k}", file,
                                    line_of(raw, k)))


def read_accelerator(path: str | Path) -> ZigzagAccelerator:
    """Read a ZigZag accelerator YAML (``memories`` + ``operational_array``).

    Raises:
        ConfigError: every problem found, each naming ``file:line key.path``: unknown or
            missing keys, non-numbers, a memory shared along only some array dimensions, a
            per-PE memory above a shared one, an outermost memory that does not hold every
            operand.
    """
    file = str(path)
    doc = load_yaml(path, ConfigError)
    problems: list[Problem] = []
    if not isinstance(doc, LocDict):
        raise ConfigError(Problem("expected a mapping with 'memories' and "
                                  "'operational_array' (a ZigZag accelerator YAML)", "", file))
    _unknown(doc, _TOP_KEYS, "", file, problems)
    oa = doc.get("operational_array")
    dims: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()
    unit_energy = unit_area = 0.0
    if not isinstance(oa, LocDict):
        problems.append(Problem("expected a mapping (unit_energy, unit_area, dimensions, "
                                "sizes)", "operational_array", file, line_of(doc,
                                                                              "operational_array")))
    else:
        _unknown(oa, _ARRAY_KEYS, "operational_array", file, problems)
        unit_energy = _num(oa, "unit_energy", "operational_array", file, problems)
        unit_area = _num(oa, "unit_area", "operational_array", file, problems) \
            if "unit_area" in oa else 0.0
        d, s = oa.get("dimensions"), oa.get("sizes")
        if not isinstance(d, list) or not isinstance(s, list) or len(d) != len(s) or not d \
                or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in s):
            problems.append(Problem("expected 'dimensions' [D1, D2, ...] and 'sizes' of the "
                                    "same length (positive integers)",
                                    "operational_array.sizes", file, line_of(oa, "sizes")))
        else:
            dims, sizes = tuple(str(x) for x in d), tuple(int(x) for x in s)
    mems_raw = doc.get("memories")
    memories: list[ZigzagMemory] = []
    if not isinstance(mems_raw, LocDict) or not mems_raw:
        problems.append(Problem("expected a mapping of memories (name: attributes), innermost "
                                "first", "memories", file, line_of(doc, "memories")))
        mems_raw = LocDict()
    for name, raw in mems_raw.items():
        w = f"memories.{name}"
        if not isinstance(raw, LocDict):
            problems.append(Problem("expected a mapping of attributes", w, file,
                                    line_of(mems_raw, name)))
            continue
        _unknown(raw, _MEMORY_KEYS, w, file, problems)
        missing = [k for k in _MEMORY_REQUIRED if k not in raw]
        if missing:
            problems.append(Problem(f"missing {', '.join(missing)}", w, file,
                                    line_of(mems_raw, name)))
            continue
        ops, served = raw["operands"], raw["served_dimensions"]
        if not isinstance(ops, list) or not ops or \
                any(o not in ("I1", "I2", "O") for o in ops):
            problems.append(Problem(f"expected operands from I1, I2, O, got {ops!r}",
                                    f"{w}.operands", file, line_of(raw, "operands")))
            continue
        if not isinstance(served, list) or (served and sorted(map(str, served)) != sorted(dims)):
            problems.append(Problem(
                f"served_dimensions {served!r}: archsim reads [] (one instance per PE) or "
                f"every array dimension {list(dims)} (one instance for the array)",
                f"{w}.served_dimensions", file, line_of(raw, "served_dimensions")))
            continue
        if "r_bw" in raw or "w_bw" in raw:        # ZigZag 2.x: r_bw / w_bw per memory
            r_bw = _num(raw, "r_bw", w, file, problems, 1)
            w_bw = _num(raw, "w_bw", w, file, problems, 1)
            shared, r_acc, w_acc = False, r_bw, w_bw
        else:                                      # ZigZag 3.x: bandwidths on the ports
            bws = _port_bandwidths(raw, w, file, problems)
            if bws is None:
                continue
            r_bw, w_bw, shared, r_acc, w_acc = bws
        memories.append(ZigzagMemory(
            str(name), _num(raw, "size", w, file, problems, 1), r_bw, w_bw,
            _num(raw, "r_cost", w, file, problems), _num(raw, "w_cost", w, file, problems),
            _num(raw, "area", w, file, problems) if "area" in raw else 0.0,
            tuple(str(o) for o in ops), not served, line_of(mems_raw, name), shared,
            r_acc, w_acc))
    seen_shared = False
    for m in memories:
        if m.per_pe and seen_shared:
            problems.append(Problem("a per-PE memory (served_dimensions []) above a shared one: "
                                    "list the per-PE memories first (innermost first)",
                                    f"memories.{m.name}", file, m.line))
        seen_shared |= not m.per_pe
    if len(memories) == len(mems_raw) and memories and set(memories[-1].operands) != {"I1", "I2", "O"}:
        problems.append(Problem("the outermost memory must hold every operand (I1, I2, O)",
                                f"memories.{memories[-1].name}.operands", file,
                                memories[-1].line))
    if problems:
        raise ConfigError(problems)
    return ZigzagAccelerator(str(doc.get("name", Path(path).stem)), tuple(memories),
                             unit_energy, unit_area, dims, sizes, file)


def _port_bandwidths(raw: LocDict, where: str, file: str, problems: list[Problem]
                     ) -> tuple[float, float, bool, float, float] | None:
    """(read bits/cycle, write bits/cycle, shared, read access bits, write access bits) of
    a ZigZag 3.x memory from its ``ports`` (``type: read | write | read_write``,
    ``bandwidth_max``: the access that ``r_cost`` / ``w_cost`` price): bandwidth = the sum
    over the ports that can read (write), access = the widest such port; shared when every
    port is read_write (reads and writes then share the ports' bandwidth)."""
    ports = raw.get("ports")
    if not isinstance(ports, list) or not ports or \
            not all(isinstance(p, LocDict) and "type" in p for p in ports):
        problems.append(Problem("missing r_bw, w_bw (ZigZag 2.x) or ports with type and "
                                "bandwidth_max (ZigZag 3.x)", where, file,
                                line_of(raw, "ports") or raw.line))
        return None
    rd = wr = r_acc = w_acc = 0.0
    only_rw = True
    for i, p in enumerate(ports):
        pw = f"{where}.ports[{i}]"
        if p["type"] not in _PORT_TYPES:
            problems.append(Problem(f"expected type read, write or read_write, got "
                                    f"{p['type']!r}", f"{pw}.type", file, line_of(p, "type")))
            continue
        bw = _num(p, "bandwidth_max", pw, file, problems, 1)
        if p["type"] in ("read", "read_write"):
            rd, r_acc = rd + bw, max(r_acc, bw)
        if p["type"] in ("write", "read_write"):
            wr, w_acc = wr + bw, max(w_acc, bw)
        only_rw &= p["type"] == "read_write"
    if not rd or not wr:
        problems.append(Problem("the ports give no read or no write bandwidth", f"{where}.ports",
                                file, line_of(raw, "ports")))
        return None
    return rd, wr, only_rw, r_acc, w_acc


def _spatial_item(item: Any) -> tuple[str, int] | None:
    """``"K, 32"`` or ``[K, 32]`` -> (K, 32)."""
    parts = [p.strip() for p in item.split(",")] if isinstance(item, str) else \
        list(item) if isinstance(item, list) else []
    if len(parts) != 2:
        return None
    try:
        f = int(parts[1])
    except (TypeError, ValueError):
        return None
    return (str(parts[0]), f) if f >= 1 else None


def read_mapping(path: str | Path) -> list[ZigzagMappingEntry]:
    """Read a ZigZag mapping YAML (a list of entries).

    Raises:
        ConfigError: every problem, naming ``file:line key.path`` (unknown keys, a bad
            ``spatial_mapping`` item, an operand link to something other than I1/I2/O).
    """
    file = str(path)
    doc = load_yaml(path, ConfigError)
    if not isinstance(doc, LocList) or not doc:
        raise ConfigError(Problem("expected a list of mapping entries (- name: default ...)",
                                  "", file))
    problems: list[Problem] = []
    out = []
    for i, raw in enumerate(doc):
        w = f"[{i}]"
        if not isinstance(raw, LocDict) or "name" not in raw:
            problems.append(Problem("expected a mapping with a 'name'", w, file,
                                    line_of(doc, i)))
            continue
        _unknown(raw, _MAPPING_KEYS, w, file, problems)
        spatial: dict[str, tuple[tuple[str, int], ...]] = {}
        sm = raw.get("spatial_mapping") or LocDict()
        if not isinstance(sm, LocDict):
            problems.append(Problem("expected a mapping D1: [K, 32] ...",
                                    f"{w}.spatial_mapping", file, line_of(raw, "spatial_mapping")))
            sm = LocDict()
        for d, items in sm.items():
            seq = items if isinstance(items, list) and items and \
                (isinstance(items[0], (str, list))) else [items]
            got = [_spatial_item(x) for x in seq]
            if any(g is None for g in got):
                problems.append(Problem(f"expected items 'DIM, factor' (e.g. 'K, 32'), got "
                                        f"{items!r}", f"{w}.spatial_mapping.{d}", file,
                                        line_of(sm, d)))
                continue
            spatial[str(d)] = tuple(g for g in got if g is not None)
        links_raw = raw.get("memory_operand_links") or LocDict()
        links = {str(k): str(v) for k, v in links_raw.items()} \
            if isinstance(links_raw, dict) else {}
        for k, v in links.items():
            if k not in ("W", "I", "O") or v not in ("I1", "I2", "O"):
                problems.append(Problem(f"expected a layer operand W/I/O linked to a memory "
                                        f"operand I1/I2/O, got {k}: {v}",
                                        f"{w}.memory_operand_links.{k}", file,
                                        line_of(links_raw, k)))
        out.append(ZigzagMappingEntry(str(raw["name"]), spatial, links,
                                      "temporal_ordering" in raw, file, line_of(doc, i)))
    if problems:
        raise ConfigError(problems)
    return out


def hierarchy(acc: ZigzagAccelerator, links: dict[str, str], kind: str,
              precision: dict[str, int] | None = None) -> tuple[Hierarchy, Constraints]:
    """The accelerator as a nest-model hierarchy for an Einsum of ``kind`` (``conv2D`` or
    ``gemm``), with each memory keeping exactly the data spaces of the operands it serves.

    Per level: capacity = ``size`` / word bits; read (write) bandwidth = ``r_bw`` (``w_bw``)
    / word bits words per cycle per instance; energy per word = ``r_cost`` x word bits /
    ``r_bw`` (a ZigZag cost is per ``r_bw``-bit access), writes and updates likewise with
    ``w_cost`` / ``w_bw``. The word of a level is its widest served operand's precision
    (``precision``, default :data:`DEFAULT_PRECISION`). Per-PE memories have one instance per
    MAC; the array fans out between them and the shared memories (``D1`` on X).

    Args:
        links: layer operand -> memory operand (``{"W": "I2", "I": "I1", "O": "O"}``).
    """
    prec = dict(DEFAULT_PRECISION, **(precision or {}))
    spaces = LAYER_OPERANDS[kind]
    by_mem = {v: k for k, v in links.items()}          # memory operand -> layer operand
    pes = acc.macs
    mesh_x = acc.sizes[0]
    mesh_y = pes // mesh_x
    levels: list[StorageLevel] = []
    cons: dict[str, LevelConstraint] = {}
    placed_array = False
    for i, m in enumerate(acc.memories):
        if not m.per_pe and not placed_array:
            levels.append(StorageLevel(ARRAY_LEVEL, instances=1, mesh_x=mesh_x, mesh_y=mesh_y,
                                       network_only=True, word_bits=1))
            placed_array = True
        ops = [by_mem[o] for o in m.operands if o in by_mem]
        bits = max((prec[o] for o in ops), default=8)
        e_r = m.r_cost_pj * bits / (m.r_access_bits or m.r_bw_bits)
        e_w = m.w_cost_pj * bits / (m.w_access_bits or m.w_bw_bits)
        outer = i == len(acc.memories) - 1
        levels.append(StorageLevel(
            m.name, instances=pes if m.per_pe else 1,
            size_words=None if outer else max(1, int(m.size_bits // bits)), word_bits=bits,
            read_bw=m.r_bw_bits / bits, write_bw=m.w_bw_bits / bits,
            energy_pj={"read": e_r, "write": e_w, "update": e_w},
            technology="DRAM" if outer else "SRAM", shared_bw=m.shared_rw))
        cons[m.name] = LevelConstraint(keep=frozenset(spaces[o] for o in ops))
    if not placed_array:               # every memory is per PE: the array sits on top
        raise ConfigError(Problem("no memory serves the whole array (served_dimensions "
                                  "[D1, D2, ...])", "memories", acc.file))
    hier = Hierarchy(tuple(levels), ComputeLevel("mac", pes, {"compute": acc.unit_energy_pj},
                                                 prec["I"]), acc.name)
    return hier, Constraints(cons)
