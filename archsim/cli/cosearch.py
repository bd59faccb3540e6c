"""``archsim cosearch SPEC``: co-search networks and (heterogeneous) hardware under design
specs (:func:`archsim.explore.run_cosearch`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from archsim.cli.common import positive_int
from archsim.explore.cosearch import run_cosearch, write_outputs
from archsim.explore.cosearch_spec import load_cosearch

HELP = ("co-search networks and (heterogeneous) hardware under design specs; see "
        "'archsim cosearch --help'")
DESCRIPTION = "Co-search networks and (heterogeneous) hardware under design specs."


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Spec, store, outputs, backend."""
    ap.add_argument("spec", help="co-search spec YAML")
    ap.add_argument("--db", help="SQLite result store (default: SPEC with .sqlite)")
    ap.add_argument("--out", help="write summary.txt, pareto.csv, best.csv and plots here")
    ap.add_argument("--backend", choices=("local", "dask"), default="local")
    ap.add_argument("--scheduler", help="dask scheduler address (default: a LocalCluster)")
    ap.add_argument("--workers", type=positive_int, default=None,
                    help="default: os.cpu_count()")
    ap.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> int:
    """Run the co-search; print its summary and the files written."""
    db = args.db or str(Path(args.spec).with_suffix(".sqlite"))
    spec = load_cosearch(args.spec)
    res = run_cosearch(spec, db, backend=args.backend, workers=args.workers,
                       scheduler=args.scheduler,
                       progress=False if args.no_progress else None, with_json=False)
    print(res.summary())
    if args.out:
        for f in write_outputs(res, args.out):
            print(f"wrote {f}")
    return 0
