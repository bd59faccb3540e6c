"""``archsim map --timeloop`` / ``archsim run timeloop:DIR``: Timeloop inputs, Timeloop-style stats.

Usage::

    archsim map --timeloop arch.yaml --problem prob.yaml [--mapping map.yaml] [--ert ERT.yaml]
    archsim run timeloop:DIR [--problem prob.yaml] [--search]

Without a mapping (or with ``--search``) the vectorised mapper (:mod:`mapper.einsum_search`)
finds one for ``--objective`` (edp by default, Timeloop's default metric) within
``--time-budget`` seconds; ``--save-mapping`` writes it as Timeloop mapping YAML.

Prints, per level and data space, the per-instance scalar reads, fills and updates, the
energy, fJ/compute per level, cycles and utilisation — the figures Timeloop's
``timeloop-mapper.stats.txt`` reports — computed by :mod:`dataflow.nest`. Bad input
prints one line naming the file/key and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from archsim.arch.timeloop import (
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
from archsim.workloads.errors import ArchsimError, ConfigError, Problem

__all__ = ["main", "format_stats"]


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


def _resolve(name: str) -> Path:
    """A folder path, or the name of a design under ``examples/timeloop/``."""
    p = Path(name)
    if p.is_dir():
        return p
    shipped = Path(__file__).resolve().parent.parent / "examples" / "timeloop" / name
    return shipped if shipped.is_dir() else p


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="archsim map --timeloop",
                                 description="Evaluate a Timeloop v0.4 design and mapping.")
    ap.add_argument("--timeloop", metavar="ARCH", help="Timeloop architecture YAML")
    ap.add_argument("--problem", metavar="PROB", help="Timeloop problem YAML")
    ap.add_argument("--mapping", metavar="MAP", help="Timeloop mapping YAML")
    ap.add_argument("--ert", metavar="ERT", help="Accelergy ERT or ERT_summary YAML")
    ap.add_argument("--json", action="store_true", help="print a JSON summary instead")
    ap.add_argument("--search", action="store_true",
                    help="search a mapping even if the folder has one")
    ap.add_argument("--objective", choices=("energy", "edp", "latency"), default="edp",
                    help="search objective (default edp, as Timeloop's mapper)")
    ap.add_argument("--time-budget", type=float, default=8.0, metavar="S",
                    help="search time in seconds (default 8)")
    ap.add_argument("--seed", type=int, default=0, help="search seed (default 0)")
    ap.add_argument("--save-mapping", metavar="PATH",
                    help="write the evaluated mapping as Timeloop mapping YAML")
    ap.add_argument("--stationary-resets", choices=("pre-2025", "post-2025"), default="pre-2025",
                    help="Timeloop's reuse rule for stationary steps (default: the rule of the "
                         "published reference outputs; see docs/timeloop.md). The search always "
                         "ranks mappings with the default rule")
    return ap


def _search(prob: Einsum, hier: Hierarchy, cons: Constraints,
            args: argparse.Namespace) -> tuple[NestMapping, str]:
    from archsim.mapper.einsum_search import search

    try:
        r = search(prob, hier, cons, objective=args.objective, time_budget_s=args.time_budget,
                   seed=args.seed)
    except ValueError as exc:
        raise ConfigError(Problem(f"mapping search failed: {exc}", "--time-budget")) from None
    return r.mapping, (f"Searched {r.evaluations:,} mappings in {r.seconds:.1f} s "
                       f"({r.evals_per_s:,.0f}/s, objective {args.objective})\n")


def main(argv: Sequence[str]) -> int:
    """Entry point; ``argv`` starts with ``map`` or ``run``. Returns the exit code."""
    argv = list(argv)
    ap = _parser()
    searched = ""
    try:
        if argv[0] == "run":
            args = ap.parse_args(argv[2:])
            des = load_dir(_resolve(argv[1][len("timeloop:"):]), args.problem,
                           with_mapping=not args.search and not args.problem)
            hier, prob, mp, cons = des.hierarchy, des.problem, des.mapping, des.constraints
            if prob is None:
                raise ConfigError(Problem("no problem YAML found (pass --problem)", "", argv[1]))
        else:
            args = ap.parse_args(argv[1:])
            if not args.problem:
                print("archsim map --timeloop: --problem is required", file=sys.stderr)
                return 2
            ert = read_ert(args.ert) if args.ert else None
            hier, cons = read_arch(args.timeloop, ert)
            prob = read_problem(args.problem)
            mp = read_mapping(args.mapping, hier, prob) if args.mapping and not args.search \
                else None
        if args.time_budget <= 0:
            print("archsim: --time-budget must be > 0 seconds", file=sys.stderr)
            return 2
        if mp is None:
            mp, searched = _search(prob, hier, cons, args)
        res = analyse(prob, hier, mp, stationary_breaks=args.stationary_resets == "pre-2025")
    except ArchsimError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    if args.save_mapping:
        Path(args.save_mapping).write_text(write_mapping(mp, hier, prob))
    if searched and not args.json:
        print(searched)
    if args.json:
        print(json.dumps({"cycles": res.cycles, "energy_pj": res.energy_pj,
                          "fj_per_compute": res.fj_per_compute, "utilization": res.utilization,
                          "feasible": res.feasible, "reasons": res.reasons,
                          "accesses": {lv: {ds: {"reads": s.reads, "fills": s.fills,
                                                 "updates": s.updates} for ds, s in per.items()}
                                       for lv, per in res.stats.items()}}, indent=1))
    else:
        print(format_stats(res, mp.describe(hier)))
    return 0 if res.feasible else 1
