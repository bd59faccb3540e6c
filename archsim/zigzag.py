"""A network on ZigZag inputs (``archsim map --zigzag-accelerator A.yaml --zigzag-mapping
M.yaml --model net.onnx``): ZigZag's accelerator and mapping YAML (:mod:`arch.zigzag`), the
network's matrix layers (an ONNX file read for shapes only, or a zoo model) and, per layer,
the best loop nest of :mod:`mapper.einsum_search` on the accelerator's memory hierarchy with
the mapping file's spatial unrolling fixed — the job ZigZag's temporal-mapping search does,
with archsim's nest model (Timeloop's counting rules, docs/timeloop.md).

    from archsim.zigzag import evaluate_zigzag
    run = evaluate_zigzag("tpu_like.yaml", "tpu_like_mapping.yaml", "resnet18.onnx")
    print(run.table())

Each distinct (layer shape, spatial unrolling, operand links) is searched once, with a fixed
number of seeded candidates (the same result on any machine). Layers without MACs
(element-wise, pooling, normalisation) are not mapped, as in ZigZag; they are counted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from archsim.arch.zigzag import (
    ARRAY_LEVEL,
    DEFAULT_PRECISION,
    LAYER_DIMS,
    LAYER_OPERANDS,
    ZigzagAccelerator,
    ZigzagMappingEntry,
    hierarchy,
    read_accelerator,
    read_mapping,
)
from archsim.dataflow.einsum import Einsum, from_op
from archsim.dataflow.nest import Constraints, LevelConstraint, NestMapping, NestResult
from archsim.mapper.factors import divisors
from archsim.workloads.errors import ConfigError, MappingError, Problem
from archsim.workloads.graph import Workload

__all__ = ["ZigzagLayer", "ZigzagRun", "evaluate_zigzag", "layer_constraints",
           "ZIGZAG_EVALUATIONS"]

#: Seeded candidates the nest search judges per distinct layer.
ZIGZAG_EVALUATIONS = 20_000
#: ZigZag's op-type names of archsim's matrix ops (a mapping entry may name either).
_OP_TYPES = {"Conv2d": ("Conv",), "Gemm": ("Gemm", "MatMul")}


@dataclass(frozen=True)
class ZigzagLayer:
    """One mapped layer: its name, the mapping entry used, the searched nest and its counts."""

    name: str
    entry: str
    problem: Einsum
    mapping: NestMapping
    result: NestResult


@dataclass(frozen=True)
class ZigzagRun:
    """Every matrix layer of a network mapped on a ZigZag accelerator."""

    accelerator: ZigzagAccelerator
    layers: tuple[ZigzagLayer, ...]
    skipped: int
    objective: str

    @property
    def energy_pj(self) -> float:
        return sum(x.result.energy_pj for x in self.layers)

    @property
    def cycles(self) -> int:
        """Layers run one after another: the sum of their cycles."""
        return sum(x.result.cycles for x in self.layers)

    def table(self) -> str:
        """Per-layer cycles, energy, utilisation and spatial unrolling; totals last."""
        out = [f"ZigZag accelerator {self.accelerator.name} ({self.accelerator.macs} MACs, "
               f"{len(self.accelerator.memories)} memories); objective {self.objective}",
               f"{'layer':28s} {'entry':10s} {'MACs':>12s} {'cycles':>11s} {'util':>6s} "
               f"{'energy uJ':>10s}  spatial"]
        for x in self.layers:
            lm = x.mapping.levels[[i for i, lv in enumerate(x.mapping.levels)
                                   if lv.spatial][0]] if any(lv.spatial for lv in
                                                             x.mapping.levels) else None
            sp = " ".join(f"{d}{f}{a}" for d, f, a in lm.spatial) if lm else "-"
            out.append(f"{x.name[:28]:28s} {x.entry[:10]:10s} {x.result.macs:12,d} "
                       f"{x.result.cycles:11,d} {x.result.utilization:6.3f} "
                       f"{x.result.energy_pj / 1e6:10.3f}  {sp}")
        out.append(f"total: {len(self.layers)} layers mapped ({self.skipped} ops without "
                   f"MACs not mapped), {self.cycles:,} cycles, {self.energy_pj / 1e6:.3f} uJ")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"accelerator": self.accelerator.name, "objective": self.objective,
                "cycles": self.cycles, "energy_pj": self.energy_pj, "skipped": self.skipped,
                "layers": [{"name": x.name, "entry": x.entry, "macs": x.result.macs,
                            "cycles": x.result.cycles, "energy_pj": x.result.energy_pj,
                            "utilization": x.result.utilization} for x in self.layers]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)


def _entry_for(op: Any, entries: list[ZigzagMappingEntry]) -> ZigzagMappingEntry | None:
    """ZigZag's choice: the entry named as the layer, else its op type, else ``default``."""
    by_name = {e.name: e for e in entries}
    for key in (op.name, *_OP_TYPES.get(type(op).__name__, ()), "default"):
        if key in by_name:
            return by_name[key]
    return None


def _largest_divisor_at_most(n: int, f: int) -> int:
    return max(d for d in divisors(n) if d <= f)


def layer_constraints(problem: Einsum, kind: str, entry: ZigzagMappingEntry,
                      base: Constraints, acc: ZigzagAccelerator) -> Constraints:
    """``base`` (the keep sets) plus the entry's spatial unrolling on the array level: the
    listed dims with their factors (``D1`` on X, the rest on Y), every other dim 1. ZigZag
    lets an unrolling exceed its dim (the extra PEs idle); archsim's factors divide their
    bound exactly, so a factor becomes the largest divisor of the bound not above it.

    Raises:
        ConfigError: an array dimension the accelerator does not have, or an unrolling
            wider than its array dimension (naming the mapping file, line and entry).
    """
    dimensions = acc.dimensions
    names = LAYER_DIMS[kind]
    x_dims: list[str] = []
    y_dims: list[str] = []
    factors: dict[str, int] = {d: 1 for d in problem.dims}
    for axis, items in entry.spatial.items():
        if axis not in dimensions:
            raise ConfigError(Problem(f"unknown array dimension {axis!r} (the accelerator has "
                                      f"{', '.join(dimensions)})",
                                      f"{entry.name}.spatial_mapping.{axis}", entry.file,
                                      entry.line))
        width = acc.sizes[dimensions.index(axis)]
        if math.prod(f for _, f in items) > width:
            raise ConfigError(Problem(
                f"unrolls {' x '.join(f'{d} {f}' for d, f in items)} on array dimension "
                f"{axis} of size {width} ({acc.file})", f"{entry.name}.spatial_mapping.{axis}",
                entry.file, entry.line))
        for dim, f in items:
            ours = names.get(dim)
            if ours is None or ours not in problem.dims:
                continue                  # a dim this layer does not have: unrolled 1-wide
            factors[ours] = _largest_divisor_at_most(problem.dims[ours], f)
            (x_dims if axis == dimensions[0] else y_dims).append(ours)
    levels = dict(base.levels)
    levels[ARRAY_LEVEL] = LevelConstraint(spatial_factors=factors,
                                          spatial_permutation=tuple(x_dims + y_dims),
                                          spatial_split=len(x_dims))
    return Constraints(levels)


def evaluate_zigzag(accelerator: str | Path, mapping: str | Path, workload: Workload, *,
                    objective: str = "energy", evaluations: int = ZIGZAG_EVALUATIONS,
                    seed: int = 0, progress: Callable[[int, int], None] | None = None
                    ) -> ZigzagRun:
    """Map every matrix layer of ``workload`` on a ZigZag accelerator.

    Args:
        accelerator, mapping: ZigZag's accelerator YAML and mapping YAML.
        objective: ``energy`` (ZigZag's default), ``latency`` or ``edp``.
        evaluations: seeded candidates per distinct layer.
        progress: called as ``progress(done, total)`` after each op.

    Raises:
        ConfigError: a bad accelerator or mapping file (file:line key), a layer with no
            mapping entry (no entry named as it, its op type or ``default``).
        MappingError: a layer with no feasible mapping (naming it and the entry).
    """
    # deferred: loads numba (the nest search's compiled kernel)
    from archsim.mapper.einsum_search import search

    acc = read_accelerator(accelerator)
    entries = read_mapping(mapping)
    layers: list[ZigzagLayer] = []
    memo: dict[Any, tuple[NestMapping, NestResult]] = {}
    skipped = 0
    ops = workload.ops()
    problems: list[Problem] = []
    for n_done, op in enumerate(ops, 1):
        if progress is not None:
            progress(n_done, len(ops))
        if type(op).__name__ not in _OP_TYPES:
            skipped += 1
            continue
        entry = _entry_for(op, entries)
        if entry is None:
            problems.append(Problem(f"layer {op.name!r}: no mapping entry named as it, "
                                    f"{'/'.join(_OP_TYPES[type(op).__name__])} or 'default'",
                                    "", str(mapping)))
            continue
        if entry.temporal_ordering:
            problems.append(Problem("temporal_ordering is not read (archsim searches the "
                                    "temporal loops); remove it", f"{entry.name}",
                                    entry.file, entry.line))
            continue
        problem = from_op(op)
        kind = "conv2D" if "Weights" in {ds.name for ds in problem.data_spaces} else "gemm"
        # each operand in its own precision (a memory holding 8-bit inputs and 16-bit
        # outputs counts an input as half of its 16-bit word)
        bits = {LAYER_OPERANDS[kind][o]: b for o, b in DEFAULT_PRECISION.items()}
        problem = replace(problem, data_spaces=tuple(replace(ds, word_bits=bits[ds.name])
                                                     for ds in problem.data_spaces))
        links = entry.links or {"W": "I2", "I": "I1", "O": "O"}
        key = (problem.signature(), kind, entry.name, tuple(sorted(links.items())))
        if key not in memo:
            hier, base = hierarchy(acc, links, kind)
            cons = layer_constraints(problem, kind, entry, base, acc)
            try:
                r = search(problem, hier, cons, objective=objective,
                           time_budget_s=float("inf"), max_evaluations=evaluations, seed=seed)
            except ValueError:
                raise MappingError(Problem(f"layer {op.name!r}: no feasible mapping with the "
                                           f"spatial unrolling of entry {entry.name!r} "
                                           f"among {evaluations:,} candidates",
                                           entry.name, entry.file, entry.line)) from None
            memo[key] = (r.mapping, r.result)
        nm, res = memo[key]
        layers.append(ZigzagLayer(op.name, entry.name, problem, nm, res))
    if problems:
        raise ConfigError(problems)
    return ZigzagRun(acc, tuple(layers), skipped, objective)
