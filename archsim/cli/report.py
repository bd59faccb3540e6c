"""``archsim report DB -o DIR``: a static HTML report (plots and best designs) of a sweep
store (:func:`archsim.explore.write_report`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archsim.explore.report import write_report
from archsim.explore.spec import METRICS

HELP = "static HTML report of a sweep store; see 'archsim report --help'"
DESCRIPTION = "Write a static HTML report (plots and best designs) of a sweep store."


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Store, output folder, objectives, heatmap axes, title."""
    ap.add_argument("db")
    ap.add_argument("-o", "--output", required=True, help="output folder (index.html)")
    ap.add_argument("--objectives", help="comma-separated metrics (default: the spec's)")
    ap.add_argument("--heatmap", help="two comma-separated axis keys (default: first two)")
    ap.add_argument("--title")


def run(args: argparse.Namespace) -> int:
    """Write the report; print its page."""
    if not Path(args.db).exists():
        print(f"error: no such result store {args.db!r}", file=sys.stderr)
        return 2
    objs = [o for o in (args.objectives or "").split(",") if o] or None
    bad = [o for o in objs or [] if o not in METRICS]
    if bad:
        print(f"error: unknown metric(s) {', '.join(bad)}; expected {', '.join(METRICS)}",
              file=sys.stderr)
        return 2
    hm = None
    if args.heatmap:
        hm_keys = args.heatmap.split(",")
        if len(hm_keys) != 2:
            print("error: --heatmap expects two comma-separated axis keys", file=sys.stderr)
            return 2
        hm = (hm_keys[0], hm_keys[1])
    page = write_report(args.db, args.output, objs, heatmap=hm, title=args.title)
    print(f"wrote {page}")
    return 0
