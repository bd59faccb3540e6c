"""Pure-Python reader for Timeloop/Accelergy v0.4 inputs (no Timeloop install needed).

Reads the architecture (``architecture.nodes`` with ``!Container``/``!Component``/
``!Parallel``/``!Nothing``; attributes inherited from containers; ``spatial: {meshX,
meshY}``; inline ``constraints``), the problem (:func:`dataflow.einsum.from_timeloop`), a
mapping (Timeloop's ``mapping:`` list of ``datatype``/``temporal``/``spatial`` directives,
factors like ``C1 M8 R3``, permutations innermost first, ``split``) and Accelergy's energy
reference table (``ERT.yaml`` or ``ERT_summary.yaml``).

Timeloop flattens the hierarchy: each container with a spatial mesh becomes a
network-only level ``inter_<name>_spatial`` at its place in the list; components become
storage levels (or the compute level); ``!Parallel`` children follow in their listed order.
Anything that changes Timeloop's semantics and that the model does not implement (sparsity,
multiple buffering, overbooking, shared bandwidth, metadata) raises :class:`ConfigError`
naming the key; attributes only Accelergy's estimators read (``technology``, ``n_banks``...)
are accepted and ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from archsim.arch.timeloop.ert import DerivedErt, derive_ert
from archsim.dataflow.einsum import Einsum, from_timeloop
from archsim.dataflow.hierarchy import ComputeLevel, Hierarchy, StorageLevel
from archsim.dataflow.nest import Constraints, LevelConstraint, LevelMapping, NestMapping
from archsim.workloads.errors import ConfigError, MappingError, Problem
from archsim.workloads.yamlio import LocDict, _StrictLoader, line_of

__all__ = ["TimeloopDesign", "Constraints", "LevelConstraint", "load_yaml_any", "read_arch",
           "read_problem", "read_mapping", "read_ert", "load_dir", "write_mapping", "arch_ert"]

_COMPUTE_CLASSES = {"intmac", "mac", "compute", "fpmac", "intmac_v2", "int_mac"}
_STORAGE_CLASSES = {"DRAM", "SRAM", "smartbuffer_SRAM", "smartbuffer_RF", "storage", "regfile",
                    "smart_storage", "buffet_collection", "aladdin_register", "register"}
# Attributes that only Accelergy's estimators read, or that are neutral for the dense model.
_IGNORED_ATTRS = {"technology", "n_banks", "type", "nports", "num_ports", "n_rdwr_ports",
                  "n_rw_ports", "adder_width", "multiplier_width", "update_fifo_depth",
                  "global_cycle_seconds", "has_power_gating", "power_gated_at", "latency",
                  "reduction_supported", "meshX", "meshY", "version", "n_rd_ports",
                  "n_wr_ports", "min_utilization"}
_UNSUPPORTED_ATTRS = {"multiple_buffering": 1, "allow_overbooking": False,
                      "shared_bandwidth": None, "metadata_storage_width": None,
                      "metadata_storage_depth": None, "metadata_datawidth": None}


class _TimeloopLoader(_StrictLoader):
    """The strict loader, also accepting Timeloop's ``!Tag`` node types."""


def _construct_tagged(loader: _TimeloopLoader, tag_suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        data = loader.construct_yaml_map_loc(node)
    elif isinstance(node, yaml.SequenceNode):
        data = LocDict({"nodes": loader.construct_sequence(node, deep=True)})
    else:
        data = LocDict()
    data["!tag"] = tag_suffix
    return data


def _construct_yaml_map_loc(self: _TimeloopLoader, node: yaml.MappingNode) -> LocDict:
    ctor = self.yaml_constructors[yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG]
    return ctor(self, node)  # type: ignore[no-any-return]


_TimeloopLoader.construct_yaml_map_loc = _construct_yaml_map_loc  # type: ignore[attr-defined]
_TimeloopLoader.add_multi_constructor("!", _construct_tagged)


def load_yaml_any(path: str | Path) -> Any:
    """Load a Timeloop/Accelergy YAML file strictly (duplicate keys are errors)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(Problem(f"cannot read file: {exc.strerror or exc}", "", str(path))) \
            from None
    loader = _TimeloopLoader(text)
    loader.problems = []
    loader.filename = str(path)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(Problem(f"invalid YAML: {getattr(exc, 'problem', None) or exc}", "",
                                  str(path), mark.line + 1 if mark is not None else None)) \
            from None
    finally:
        loader.dispose()
    if loader.problems:
        raise ConfigError(loader.problems)
    if not isinstance(data, dict):
        raise ConfigError(Problem("expected a mapping at the top level", "", str(path)))
    return data


@dataclass(frozen=True)
class TimeloopDesign:
    """A design read from Timeloop inputs."""

    hierarchy: Hierarchy
    constraints: Constraints
    problem: Einsum | None = None
    mapping: NestMapping | None = None
    derived_ert: DerivedErt | None = None


def _factors(value: Any, where: str, file: str | None) -> dict[str, int]:
    """``"C1 M8"``, ``[C=1, M=8]``, ``"N=1,C=1"`` -> {dim: bound}."""
    items: list[str] = []
    if isinstance(value, str):
        items = value.replace(",", " ").split()
    elif isinstance(value, list):
        items = [str(v) for v in value]
    else:
        raise ConfigError(Problem("expected factors like 'C1 M8' or [C=1, M=8]", where, file))
    out: dict[str, int] = {}
    for it in items:
        it = it.replace("=", "")
        name = it.rstrip("0123456789")
        num = it[len(name):]
        if not name or not num:
            raise ConfigError(Problem(f"bad factor {it!r} (expected DIM<int>)", where, file))
        out[name] = int(num)
    return out


def _perm(value: Any) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    s = str(value)
    if " " in s or "," in s:
        return tuple(x for x in s.replace(",", " ").split() if x)
    return tuple(s)


def _constraint(raw: Any, where: str, file: str | None) -> LevelConstraint:
    if raw is None:
        return LevelConstraint()
    allowed = {"dataspace", "temporal", "spatial"}
    for k in raw:
        if k not in allowed:
            raise ConfigError(Problem(f"unsupported constraint {k!r} (expected one of "
                                      f"{sorted(allowed)})", f"{where}.constraints.{k}", file,
                                      line_of(raw, k)))
    ds = raw.get("dataspace", {}) or {}
    tp = raw.get("temporal", {}) or {}
    sp = raw.get("spatial", {}) or {}
    for sub, name in ((tp, "temporal"), (sp, "spatial")):
        for k in sub:
            if k not in ("factors", "permutation", "split"):
                raise ConfigError(Problem(f"unsupported {name} constraint {k!r}",
                                          f"{where}.constraints.{name}.{k}", file,
                                          line_of(sub, k)))
    return LevelConstraint(
        keep=frozenset(ds["keep"]) if "keep" in ds else None,
        bypass=frozenset(ds.get("bypass", [])),
        temporal_factors=_factors(tp["factors"], where, file) if "factors" in tp else {},
        temporal_permutation=_perm(tp["permutation"]) if "permutation" in tp else (),
        spatial_factors=_factors(sp["factors"], where, file) if "factors" in sp else {},
        spatial_permutation=_perm(sp["permutation"]) if "permutation" in sp else (),
        spatial_split=int(sp["split"]) if "split" in sp else None)


def _num(attrs: dict[str, Any], key: str, where: str, file: str | None) -> float | None:
    v = attrs.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(Problem(f"expected a number, got {v!r}", f"{where}.attributes.{key}",
                                  file, line_of(attrs, key)))
    return float(v)


def _arch_doc(path: str | Path) -> Any:
    """The architecture YAML, checked to be the v0.4 ``architecture: {nodes}`` form."""
    file = str(path)
    doc = load_yaml_any(path)
    arch = doc.get("architecture")
    if not isinstance(arch, dict) or "nodes" not in arch:
        raise ConfigError(Problem("expected 'architecture' with 'nodes' (Timeloop v0.4; the "
                                  "v0.3 'subtree' form is not supported)", "architecture", file))
    version = str(arch.get("version", "0.4"))
    if version != "0.4":
        raise ConfigError(Problem(f"unsupported version {version!r} (expected 0.4)",
                                  "architecture.version", file, line_of(arch, "version")))
    return doc


def arch_ert(path: str | Path) -> DerivedErt:
    """The ERT of a Timeloop architecture derived by archsim's energy library."""
    return derive_ert(_arch_doc(path), str(path))


def read_arch(path: str | Path, ert: dict[str, dict[str, float]] | None = None
              ) -> tuple[Hierarchy, Constraints]:
    """Read a Timeloop v0.4 architecture YAML into a hierarchy and its constraints.

    Args:
        path: the arch file (``architecture:`` at top level).
        ert: component name -> action -> pJ (from :func:`read_ert`); without it the
            energies are derived by archsim's energy library
            (:func:`arch.timeloop.ert.derive_ert`, Accelergy's job).
    """
    file = str(path)
    doc = _arch_doc(path)
    if ert is None:
        ert = derive_ert(doc, file).energies()
    arch = doc["architecture"]
    levels: list[StorageLevel] = []        # outermost first
    cons: dict[str, LevelConstraint] = {}
    compute: ComputeLevel | None = None
    fan = 1
    inherited: dict[str, Any] = {}

    def walk(nodes: list[Any], where: str) -> None:
        nonlocal fan, compute, inherited
        for i, node in enumerate(nodes):
            w = f"{where}[{i}]"
            if not isinstance(node, dict) or "!tag" not in node:
                raise ConfigError(Problem("expected a !Container, !Component, !Parallel or "
                                          "!Nothing node", w, file, line_of(nodes, i)))
            tag = node["!tag"]
            if tag == "Nothing":
                continue
            if tag in ("Parallel", "Hierarchical"):
                walk(list(node.get("nodes", [])), f"{w}.nodes")
                continue
            name = str(node.get("name", ""))
            attrs = dict(inherited)
            attrs.update(node.get("attributes", {}) or {})
            if tag == "Container":
                allowed = {"name", "attributes", "spatial", "constraints", "!tag"}
                for k in node:
                    if k not in allowed:
                        raise ConfigError(Problem(f"unsupported container key {k!r}",
                                                  f"{w}.{k}", file, line_of(node, k)))
                inherited = attrs
                sp = node.get("spatial") or {}
                mx, my = int(sp.get("meshX", 1)), int(sp.get("meshY", 1))
                if mx * my > 1:
                    lname = f"inter_{name}_spatial"
                    levels.append(StorageLevel(lname, instances=fan, mesh_x=mx, mesh_y=my,
                                               network_only=True, word_bits=1))
                    cons[lname] = _constraint(node.get("constraints"), w, file)
                    fan *= mx * my
                continue
            if tag != "Component":
                raise ConfigError(Problem(f"unsupported node type !{tag}", w, file,
                                          line_of(nodes, i)))
            for k in node:
                if k not in {"name", "class", "subclass", "attributes", "constraints", "!tag",
                             "required_actions", "enabled", "area_scale"}:
                    raise ConfigError(Problem(f"unsupported component key {k!r}", f"{w}.{k}",
                                              file, line_of(node, k)))
            cls = str(node.get("class", ""))
            sub = str(node.get("subclass", ""))
            energies = dict((ert or {}).get(name, {}))
            if cls in _COMPUTE_CLASSES or sub in _COMPUTE_CLASSES:
                compute = ComputeLevel(name, fan, energies,
                                       int(attrs.get("datawidth", attrs.get("word_bits", 8))))
                continue
            if cls not in _STORAGE_CLASSES and sub not in _STORAGE_CLASSES:
                raise ConfigError(Problem(f"unknown component class {cls!r} (expected a storage "
                                          f"class {sorted(_STORAGE_CLASSES)} or a compute class "
                                          f"{sorted(_COMPUTE_CLASSES)})", f"{w}.class", file,
                                          line_of(node, "class")))
            own = node.get("attributes", {}) or {}
            for k, v in own.items():
                if k in _UNSUPPORTED_ATTRS and v != _UNSUPPORTED_ATTRS[k]:
                    raise ConfigError(Problem(f"attribute {k}={v!r} is not supported by the "
                                              f"model (expected {_UNSUPPORTED_ATTRS[k]!r})",
                                              f"{w}.attributes.{k}", file, line_of(own, k)))
            word_bits = int(_num(attrs, "datawidth", w, file) or
                            _num(attrs, "word_bits", w, file) or 8)
            width = _num(attrs, "width", w, file)
            depth = _num(attrs, "depth", w, file)
            cluster = int(_num(attrs, "cluster_size", w, file) or 1)
            block = int(_num(attrs, "block_size", w, file) or 0)
            if not block:
                block = max(1, int((width or word_bits) // (word_bits * cluster)))
            is_dram = cls == "DRAM" or sub == "DRAM"
            size = None if is_dram or depth is None else int(depth * block)
            levels.append(StorageLevel(
                name, instances=fan, size_words=size, word_bits=word_bits, block_size=block,
                cluster_size=cluster, read_bw=_num(attrs, "read_bandwidth", w, file),
                write_bw=_num(attrs, "write_bandwidth", w, file), energy_pj=energies,
                technology="DRAM" if is_dram else "SRAM"))
            cons[name] = _constraint(node.get("constraints"), w, file)

    walk(list(arch["nodes"]), "architecture.nodes")
    if compute is None:
        raise ConfigError(Problem("no compute component (class intmac/mac/compute) found",
                                  "architecture.nodes", file))
    # a level's mesh is the fan-out to the next level down; Timeloop puts the spatial
    # loops on the network level itself, which is what we keep.
    return Hierarchy(tuple(reversed(levels)), compute, Path(path).parent.name), \
        Constraints(cons)


def read_problem(path: str | Path) -> Einsum:
    """Read a Timeloop v0.4 problem YAML (``problem: {shape, instance}``)."""
    doc = load_yaml_any(path)
    return from_timeloop(doc, str(path))


def read_mapping(path: str | Path, hier: Hierarchy, problem: Einsum) -> NestMapping:
    """Read a Timeloop mapping YAML (``mapping:`` list) for ``hier``.

    Raises:
        MappingError: unknown target, directive type, dimension, or factors that do not
            multiply to the problem's bounds.
    """
    file = str(path)
    doc = load_yaml_any(path)
    items = doc.get("mapping")
    if not isinstance(items, list):
        raise MappingError(Problem("expected a 'mapping:' list", "mapping", file))
    temporal: dict[str, tuple[tuple[str, int], ...]] = {}
    spatial: dict[str, tuple[tuple[str, int, str], ...]] = {}
    keep: dict[str, frozenset[str]] = {}
    names = {lv.name for lv in hier.levels}
    spaces = {ds.name for ds in problem.data_spaces}
    for i, it in enumerate(items):
        w = f"mapping[{i}]"
        tgt = str(it.get("target", ""))
        if tgt not in names:
            raise MappingError(Problem(f"unknown target {tgt!r} (expected one of "
                                       f"{sorted(names)})", f"{w}.target", file,
                                       line_of(it, "target")))
        typ = str(it.get("type", ""))
        if typ in ("datatype", "bypass"):
            k = frozenset(str(x) for x in (it.get("keep") or []))
            bad = (k | frozenset(str(x) for x in (it.get("bypass") or []))) - spaces
            if bad:
                raise MappingError(Problem(f"unknown data space(s) {sorted(bad)}", f"{w}.keep",
                                           file, line_of(it, "keep")))
            keep[tgt] = k
            continue
        if typ not in ("temporal", "spatial"):
            raise MappingError(Problem(f"unsupported directive type {typ!r} (expected "
                                       "datatype, temporal or spatial)", f"{w}.type", file,
                                       line_of(it, "type")))
        fac = _factors(it.get("factors", ""), f"{w}.factors", file)
        for d in fac:
            if d not in problem.dims:
                raise MappingError(Problem(f"unknown dimension {d!r}", f"{w}.factors", file,
                                           line_of(it, "factors")))
        perm = _perm(it.get("permutation", "")) or tuple(problem.dims)
        order = [d for d in perm if d in fac] + [d for d in fac if d not in perm]
        if typ == "temporal":
            temporal[tgt] = tuple((d, fac[d]) for d in order)
        else:
            split = int(it.get("split", len(order)))
            spatial[tgt] = tuple((d, fac[d], "X" if j < split else "Y")
                                 for j, d in enumerate(order))
    levels = []
    for lv in hier.levels:
        levels.append(LevelMapping(temporal.get(lv.name, ()), spatial.get(lv.name, ()),
                                   keep.get(lv.name, frozenset())))
    nm = NestMapping(tuple(levels))
    for d, b in problem.dims.items():
        got = math.prod(f for lm in levels for dd, f in lm.temporal if dd == d) * \
            math.prod(f for lm in levels for dd, f, _ in lm.spatial if dd == d)
        if got != b:
            raise MappingError(Problem(f"factors of {d} multiply to {got}, expected {b} "
                                       "(imperfect factorisation is not supported)", "mapping",
                                       file))
    return nm


def read_ert(path: str | Path) -> dict[str, dict[str, float]]:
    """Accelergy energy reference table -> {component: {action: pJ}}.

    Accepts ``ERT_summary`` (``table_summary`` with one energy per action) and ``ERT``
    (``tables`` with ``actions[].arguments``/``energy``; the first, argument-free or
    default entry is used). Component names lose their hierarchy prefix and ``[1..n]``.
    """
    file = str(path)
    doc = load_yaml_any(path)
    out: dict[str, dict[str, float]] = {}
    if "ERT_summary" in doc:
        for comp in doc["ERT_summary"].get("table_summary", []):
            name = str(comp["name"]).split("[")[0].split(".")[-1]
            out[name] = {str(a["name"]): float(a.get("energy", a.get("average_energy", 0.0)))
                         for a in comp.get("actions", [])}
        return out
    if "ERT" in doc:
        for comp in doc["ERT"].get("tables", []):
            name = str(comp["name"]).split("[")[0].split(".")[-1]
            acts: dict[str, float] = {}
            for a in comp.get("actions", []):
                e = a.get("energy")
                if e is None and a.get("arguments"):
                    e = a["arguments"][0].get("energy")
                acts[str(a["name"])] = float(e or 0.0)
            out[name] = acts
        return out
    raise ConfigError(Problem("expected 'ERT' or 'ERT_summary' at the top level", "", file))


def load_dir(directory: str | Path, problem: str | Path | None = None,
             with_mapping: bool = True) -> TimeloopDesign:
    """Read a Timeloop example folder: ``arch.yaml``, an ERT/ERT_summary (without one the
    energies are derived by the energy library, :attr:`TimeloopDesign.derived_ert`), a
    mapping (``*map.yaml``, when ``with_mapping``) and the problem (``problem`` or the
    folder's/parent's ``*problem*.yaml``)."""
    d = Path(directory)
    if not (d / "arch.yaml").is_file():
        raise ConfigError(Problem("no arch.yaml in the folder", "", str(d)))
    erts = sorted(d.glob("*ERT*.yaml"))
    derived = None if erts else arch_ert(d / "arch.yaml")
    ert = read_ert(erts[0]) if erts else derived.energies()  # type: ignore[union-attr]
    hier, cons = read_arch(d / "arch.yaml", ert)
    prob_path = Path(problem) if problem else None
    if prob_path is None:
        cands = sorted(d.glob("*problem*.yaml")) or sorted(d.parent.glob("*problem*.yaml"))
        prob_path = cands[0] if cands else None
    prob = read_problem(prob_path) if prob_path else None
    maps = sorted(d.glob("*map.yaml"))
    mapping = read_mapping(maps[0], hier, prob) if maps and prob is not None and with_mapping \
        else None
    return TimeloopDesign(hier, cons, prob, mapping, derived)


def write_mapping(mapping: NestMapping, hier: Hierarchy, problem: Einsum) -> str:
    """A mapping as Timeloop mapping YAML text (``datatype``/``temporal``/``spatial`` per
    level, factors for every dimension, permutations innermost first), readable back by
    :func:`read_mapping` and by Timeloop's model."""
    dims = list(problem.dims)
    spaces = [ds.name for ds in problem.data_spaces]
    items: list[dict[str, Any]] = []
    for lv, lm in zip(hier.levels, mapping.levels, strict=True):
        items.append({"target": lv.name, "type": "datatype", "keep": sorted(lm.keep),
                      "bypass": [s for s in spaces if s not in lm.keep]})
    for lv, lm in zip(hier.levels, mapping.levels, strict=True):
        tf = dict.fromkeys(dims, 1)
        for d, f in lm.temporal:
            tf[d] *= f
        order = [d for d, _ in lm.temporal] + [d for d in dims if d not in
                                                [x for x, _ in lm.temporal]]
        if lm.spatial:
            sf = dict.fromkeys(dims, 1)
            for d, f, _ in lm.spatial:
                sf[d] *= f
            xs = [d for d, _, a in lm.spatial if a == "X"]
            sorder = xs + [d for d in dims if d not in xs]
            items.append({"target": lv.name, "type": "spatial",
                          "factors": " ".join(f"{d}{sf[d]}" for d in dims),
                          "permutation": "".join(sorder), "split": len(xs)})
        items.append({"target": lv.name, "type": "temporal",
                      "factors": " ".join(f"{d}{tf[d]}" for d in dims),
                      "permutation": "".join(order)})
    return str(yaml.safe_dump({"mapping": items}, sort_keys=False))
