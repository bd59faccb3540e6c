"""``archsim results DB``: export or filter a sweep's result store (CSV or JSON), optionally
only its Pareto front."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from archsim.explore.pareto import pareto_rows
from archsim.explore.spec import METRICS, ConstraintSpec
from archsim.explore.store import ResultStore
from archsim.outputs import write_text_atomic

HELP = "export or filter a sweep's result store; see 'archsim results --help'"
DESCRIPTION = "Export a sweep's result store."


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Store, filter, format, front and output file."""
    ap.add_argument("db")
    ap.add_argument("--where", help="SQL condition, e.g. \"area_mm2 < 50 AND status = 'ok'\"")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--csv", action="store_true", help="CSV (the default)")
    g.add_argument("--json", action="store_true")
    ap.add_argument("--full", action="store_true", help="include each full result (JSON)")
    ap.add_argument("--pareto", metavar="OBJECTIVES", nargs="?", const="",
                    help="only the Pareto front (per design) on these comma-separated "
                         "objectives (default: the spec's), after the spec's constraints")
    ap.add_argument("-o", "--output", help="write here instead of stdout")


def run(args: argparse.Namespace) -> int:
    """Print (or write) the selected rows."""
    if not Path(args.db).exists():
        print(f"error: no such result store {args.db!r}", file=sys.stderr)
        return 2
    try:
        with ResultStore(args.db, readonly=True) as st:
            rows = st.rows(args.where, with_json=args.full)
            if args.pareto is not None:
                meta = st.meta("spec", {}) or {}
                objs = [o for o in args.pareto.split(",") if o] or meta.get("objectives") or \
                    ["latency_s", "energy_j"]
                bad = [o for o in objs if o not in METRICS]
                if bad:
                    print(f"error: unknown objective(s) {', '.join(bad)}; expected "
                          f"{', '.join(METRICS)}", file=sys.stderr)
                    return 2
                cons = {k: ConstraintSpec(**v) for k, v in (meta.get("constraints") or {}).items()}
                keep = {r["design_id"] for r in pareto_rows(rows, objs, cons)}
                rows = [r for r in rows if r["design_id"] in keep]
            text = st.export("json" if args.json else "csv", rows=rows)
    except sqlite3.Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output:
        write_text_atomic(args.output, text, "-o")
    else:
        sys.stdout.write(text)
    return 0
