"""``archsim compare DESIGN... --model M [--csv]``: one model on several designs, side by
side (:func:`archsim.compare.compare_designs`)."""

from __future__ import annotations

import argparse
import sys

from archsim.cli.common import non_empty, positive_int
from archsim.compare import compare_designs

HELP = ("one model on several designs, side by side (--csv); see 'archsim compare --help'")
DESCRIPTION = "Evaluate one model on several designs and print them side by side."


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Designs, workload, formats, fidelity, CSV."""
    ap.add_argument("designs", nargs="+", help="config YAMLs or reference-design names")
    ap.add_argument("--model", required=True, help="zoo model name or HF config.json")
    ap.add_argument("--phase", choices=("prefill", "decode", "train", "inference"))
    ap.add_argument("--batch", type=positive_int, default=1)
    ap.add_argument("--seq", type=positive_int)
    ap.add_argument("--context", type=positive_int)
    ap.add_argument("--a-format", type=non_empty)
    ap.add_argument("--w-format", type=non_empty)
    ap.add_argument("--fidelity", choices=("analytical", "cycle"), default="analytical")
    ap.add_argument("--csv", action="store_true", help="CSV instead of a text table")


def run(args: argparse.Namespace) -> int:
    """Evaluate each design; print the table or CSV."""
    cmp = compare_designs(args.designs, args.model, phase=args.phase, batch=args.batch,
                          seq=args.seq, context=args.context, a_format=args.a_format,
                          w_format=args.w_format, fidelity=args.fidelity)
    if args.csv:
        sys.stdout.write(cmp.to_csv())
    else:
        print(cmp.table())
    return 0
