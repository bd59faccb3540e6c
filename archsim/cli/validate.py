"""``archsim validate``: check config files and report every problem (exit 2 if one has any)."""

from __future__ import annotations

import argparse
import sys

from archsim.api import load
from archsim.workloads.errors import ArchsimError

HELP = "check config files; report every problem"


def add_arguments(v: argparse.ArgumentParser) -> None:
    """Config files and overrides."""
    v.add_argument("configs", nargs="+")
    v.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def run(args: argparse.Namespace) -> int:
    """One ``ok`` line per valid file, the problems of each invalid one on stderr."""
    bad = 0
    for c in args.configs:
        try:
            acc = load(c, args.overrides)
        except ArchsimError as exc:
            print(exc.render(), file=sys.stderr)
            bad += 1
            continue
        units = ", ".join(f"{u.name} ({u.kind})" for u in acc.units)
        print(f"ok  {c}: {acc.name} — {units}")
    return 2 if bad else 0
