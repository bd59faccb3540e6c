"""``archsim validation``: compare predictions with every reference figure; exit 1 if one
leaves its tolerance."""

from __future__ import annotations

import argparse
import os
import sys

from archsim import validation as v
from archsim.outputs import write_text_atomic
from archsim.workloads.errors import Problem, SpecError

HELP = "compare predictions with every reference figure; exit 1 if one leaves its tolerance"


def add_arguments(va: argparse.ArgumentParser) -> None:
    """Families, the markdown report and the scatter plot."""
    va.add_argument("--family", action="append", help="only this family (repeatable)")
    va.add_argument("--out", help="write the markdown report here (e.g. docs/validation.md)")
    va.add_argument("--plot", help="write the predicted-vs-reference scatter plot (PNG/SVG)")


def run(args: argparse.Namespace) -> int:
    """Run the comparisons, write the report and plot, list what is out of tolerance."""
    known = v.FAMILIES()
    for f in args.family or []:
        if f not in known:
            raise SpecError(Problem(f"unknown family {f!r}; expected one of {', '.join(known)}",
                                    "--family"))
    comps, gaps = v.run(args.family)
    plot_name = None
    if args.plot:
        v.plot(comps, args.plot)
        if args.out:
            plot_name = os.path.relpath(args.plot, os.path.dirname(os.path.abspath(args.out)))
    text = v.render_markdown(comps, gaps, plot_name)
    if args.out:
        write_text_atomic(args.out, text, "--out")
    bad = [c for c in comps if not c.ok]
    for c in bad:
        print(f"OUT OF TOLERANCE: {c.family} {c.design} {c.figure}: ours {c.ours:.4g} vs "
              f"{c.reference_text} {c.unit} ({c.error:+.1%}, tolerance ±{c.tolerance:.0%})",
              file=sys.stderr)
    print(f"{len(comps) - len(bad)} of {len(comps)} comparisons within tolerance"
          + (f"; report: {args.out}" if args.out else ""))
    return 1 if bad else 0
