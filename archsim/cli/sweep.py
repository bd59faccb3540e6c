"""``archsim sweep SPEC --db results.sqlite``: run or resume a design-space sweep into a
SQLite result store (:func:`archsim.explore.run_sweep`) and print its Pareto front."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from archsim.cli.common import positive_int
from archsim.explore.pareto import front_table, sweep_front
from archsim.explore.plots import plot_pareto
from archsim.explore.run import BACKENDS, first_failure, run_sweep
from archsim.explore.spec import load_spec

HELP = ("run a design-space sweep from a YAML spec into a SQLite store (resumable); see "
        "'archsim sweep --help'")
DESCRIPTION = "Run or resume a design-space sweep into a SQLite result store."


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Spec, store, backend, fidelity, progress and outputs."""
    ap.add_argument("spec", help="sweep spec YAML")
    ap.add_argument("--db", required=True, help="SQLite result store (created or resumed)")
    ap.add_argument("--backend", choices=BACKENDS, default="local")
    ap.add_argument("--scheduler", help="dask scheduler address (default: a LocalCluster)")
    ap.add_argument("--workers", type=positive_int, default=None,
                    help="default: os.cpu_count()")
    ap.add_argument("--fidelity", choices=("analytical", "cycle"), default=None,
                    help="override the spec's fidelity")
    ap.add_argument("--no-progress", "--quiet", "-q", action="store_true",
                    help="no progress on stderr")
    ap.add_argument("--with-json", action="store_true",
                    help="also store each full result with its per-op table as JSON "
                    "(~50 KB per ResNet-50 point; default: metrics only)")
    ap.add_argument("--no-json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--plot", help="write the Pareto front plot (.png or .svg)")


def run(args: argparse.Namespace) -> int:
    """Run the sweep; print the counts and the front; exit 2 when every task failed."""
    spec = load_spec(args.spec)
    if args.fidelity:
        spec = dataclasses.replace(spec, fidelity=args.fidelity)
    rep = run_sweep(spec, args.db, backend=args.backend, workers=args.workers,
                    scheduler=args.scheduler, progress=not args.no_progress and None,
                    with_json=args.with_json and not args.no_json)
    print(f"{rep.total} tasks: {rep.skipped} already stored, {rep.evaluated} evaluated "
          f"({rep.errors} errors) in {rep.elapsed_s:.1f} s ({rep.points_per_s:.1f} /s)"
          + (f", {rep.elsewhere} by another sweep on the same store" if rep.elsewhere else ""))
    failed = first_failure(args.db, rep.hashes)
    if failed:
        print(f"error: all {rep.total} tasks of {args.spec} failed; the first: {failed}",
              file=sys.stderr)
        return 2
    front = sweep_front(args.db, spec.objectives, spec.constraints, hashes=rep.hashes)
    print(front_table(front, spec.objectives))
    if args.plot:
        plot_pareto(args.db, spec.objectives[:2], args.plot, spec.constraints, rep.hashes)
        print(f"wrote {args.plot}")
    return 0
