"""Timeloop inputs evaluated with Timeloop-style stats (``archsim map --timeloop`` /
``archsim run timeloop:DIR``).

    from archsim.timeloop import evaluate_timeloop
    run = evaluate_timeloop(arch="arch.yaml", problem="prob.yaml", mapping="map.yaml")
    print(run.stats_text())

Without a mapping (or with ``search=True``) the vectorised mapper
(:mod:`archsim.mapper.einsum_search`) finds one for ``objective`` (edp by default, Timeloop's
default metric) within ``time_budget_s`` seconds.

The report holds, per level and data space, the per-instance scalar reads, fills and updates,
the energy, fJ/compute per level, cycles and utilisation — the figures Timeloop's
``timeloop-mapper.stats.txt`` reports — computed by :mod:`archsim.dataflow.nest`. Bad input
raises one :class:`~archsim.workloads.errors.ArchsimError` naming the file/key.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsim.arch.timeloop import (
    DerivedErt,
    arch_ert,
    load_dir,
    read_arch,
    read_ert,
    read_mapping,
    read_problem,
    write_mapping,
)
from archsim.dataflow.einsum import Einsum
from archsim.dataflow.hierarchy import Hierarchy
from archsim.dataflow.nest import Constraints, NestMapping, NestResult, analyse
from archsim.workloads.errors import ConfigError, Problem

__all__ = ["evaluate_timeloop", "TimeloopRun", "format_stats", "resolve_design_dir"]

#: Where ``run timeloop:NAME`` finds a shipped design folder.
EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples" / "timeloop"


def format_stats(res: NestResult, mapping_text: str = "") -> str:
    """Timeloop-style report of :func:`dataflow.nest.analyse`'s result."""
    out: list[str] = []
    if mapping_text:
        out += ["Mapping (outermost first)", "-------------------------", mapping_text, ""]
    out += ["Per-level accesses (per instance)", "---------------------------------",
            f"{'level':24s} {'data space':10s} {'inst':>5s} {'reads':>12s} {'fills':>12s} "
            f"{'updates':>12s} {'capacity':>9s} {'energy pJ':>14s}"]
    for lv, per in res.stats.items():
        for ds, st in per.items():
            out.append(f"{lv:24s} {ds:10s} {st.instances:5d} {st.reads:12d} {st.fills:12d} "
                       f"{st.updates:12d} {st.utilized_capacity:9d} {st.energy_pj:14.2f}")
    out += ["", "Summary Stats", "-------------",
            f"Utilization: {100 * res.utilization:.2f}%", f"Cycles: {res.cycles}",
            f"Energy: {res.energy_pj / 1e6:.2f} uJ", f"EDP(J*cycle): {res.edp:.2e}", "",
            f"Computes = {res.macs}", "fJ/Compute"]
    for name, e in res.energy_by_level_pj.items():
        out.append(f"    {name:45s} = {1000 * e / res.macs:.2f}")
    out.append(f"    {'Total':45s} = {res.fj_per_compute:.2f}")
    if not res.feasible:
        out += ["", "INFEASIBLE: " + "; ".join(res.reasons)]
    return "\n".join(out)


def resolve_design_dir(name: str) -> Path:
    """A folder path, or the name of a design under ``examples/timeloop/``."""
    p = Path(name)
    if p.is_dir():
        return p
    shipped = EXAMPLES_DIR / name
    return shipped if shipped.is_dir() else p


@dataclass(frozen=True)
class TimeloopRun:
    """One evaluated Timeloop design.

    Attributes:
        result: the per-level access counts, energy, cycles (:func:`dataflow.nest.analyse`).
        mapping: the mapping evaluated (given or searched).
        hierarchy: the architecture's storage hierarchy.
        problem: the Einsum evaluated.
        search_note: one line about the mapping search ("" when the mapping was given).
        derived_ert: the energy table derived by archsim's energy library when no ERT was
            given (:func:`arch.timeloop.ert.derive_ert`), else None.
    """

    result: NestResult
    mapping: NestMapping
    hierarchy: Hierarchy
    problem: Einsum
    search_note: str = ""
    derived_ert: DerivedErt | None = None

    def ert_text(self) -> str:
        """The energy table used: the derived one with each value's source, or one line
        saying that an ERT file gave it."""
        if self.derived_ert is None:
            return "Energy reference table: from the ERT file (--ert or the folder's *ERT*.yaml)"
        return self.derived_ert.table_text()

    def stats_text(self) -> str:
        """The Timeloop-style report with the mapping (outermost first)."""
        return format_stats(self.result, self.mapping.describe(self.hierarchy))

    def mapping_yaml(self) -> str:
        """The mapping as Timeloop mapping YAML."""
        return write_mapping(self.mapping, self.hierarchy, self.problem)

    def to_dict(self) -> dict[str, Any]:
        """Cycles, energy, utilisation, feasibility and the per-level accesses."""
        res = self.result
        return {"cycles": res.cycles, "energy_pj": res.energy_pj,
                "fj_per_compute": res.fj_per_compute, "utilization": res.utilization,
                "feasible": res.feasible, "reasons": res.reasons,
                "accesses": {lv: {ds: {"reads": s.reads, "fills": s.fills,
                                       "updates": s.updates} for ds, s in per.items()}
                             for lv, per in res.stats.items()}}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON (one-space indent)."""
        return json.dumps(self.to_dict(), indent=1)


def _search(prob: Einsum, hier: Hierarchy, cons: Constraints, objective: str,
            time_budget_s: float, seed: int,
            progress: Callable[[int, int], None] | None = None) -> tuple[NestMapping, str]:
    # deferred: the nest search imports numba and its kernels (~0.15 s); a given mapping
    # (and every other command, which imports this module) does not need them
    from archsim.mapper.einsum_search import search

    try:
        r = search(prob, hier, cons, objective=objective, time_budget_s=time_budget_s,
                   seed=seed, progress=progress)
    except ValueError as exc:
        raise ConfigError(Problem(f"mapping search failed: {exc}", "--time-budget")) from None
    return r.mapping, (f"Searched {r.evaluations:,} mappings in {r.seconds:.1f} s "
                       f"({r.evals_per_s:,.0f}/s, objective {objective})\n")


def evaluate_timeloop(arch: str | Path | None = None, problem: str | Path | None = None, *,
                      folder: str | Path | None = None, mapping: str | Path | None = None,
                      ert: str | Path | None = None, search: bool = False,
                      objective: str = "edp", time_budget_s: float = 8.0, seed: int = 0,
                      stationary_resets: str = "pre-2025",
                      progress: Callable[[int, int], None] | None = None) -> TimeloopRun:
    """Evaluate a Timeloop v0.4 design: ``arch`` + ``problem`` (+ ``mapping``, ``ert``)
    files, or a design ``folder`` (a path or a name under ``examples/timeloop/``) whose
    problem ``problem`` may replace.

    Args:
        search: search a mapping even if one is given (or the folder has one).
        objective: search objective (``edp``, Timeloop's mapper default; ``energy``,
            ``latency``).
        time_budget_s: search time (s).
        seed: search seed.
        stationary_resets: Timeloop's reuse rule for stationary steps: ``pre-2025`` (the rule
            of the published reference outputs) or ``post-2025`` (docs/timeloop.md).
        progress: called as ``progress(seconds done, budget)`` while a mapping is searched.
    Raises:
        ConfigError: a missing problem or a bad file (naming the file and key).
    """
    if folder is not None:
        des = load_dir(resolve_design_dir(str(folder)), str(problem) if problem else None,
                       with_mapping=not search and not problem)
        hier, prob, mp, cons = des.hierarchy, des.problem, des.mapping, des.constraints
        derived = des.derived_ert
        if prob is None:
            raise ConfigError(Problem("no problem YAML found (pass --problem)", "",
                                      f"timeloop:{folder}"))
    else:
        if arch is None or problem is None:
            raise ConfigError(Problem("expected an architecture and a problem YAML",
                                      "--timeloop" if arch is None else "--problem"))
        derived = None if ert else arch_ert(arch)
        energies = read_ert(ert) if ert else derived.energies()  # type: ignore[union-attr]
        hier, cons = read_arch(arch, energies)
        prob = read_problem(problem)
        mp = read_mapping(mapping, hier, prob) if mapping and not search else None
    note = ""
    if mp is None:
        mp, note = _search(prob, hier, cons, objective, time_budget_s, seed, progress)
    res = analyse(prob, hier, mp, stationary_breaks=stationary_resets == "pre-2025")
    return TimeloopRun(res, mp, hier, prob, note, derived)
