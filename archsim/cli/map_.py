"""``archsim map``: search the best mapping of every op and print the per-op mapping table
(= ``archsim run --mapping search``); with ``--timeloop ARCH --problem PROB``, Timeloop inputs
with Timeloop-style stats. It takes exactly the arguments of ``archsim run``
(:mod:`archsim.cli.run`)."""

from __future__ import annotations

import argparse

from archsim.cli import run as run_command

HELP = ("search the best mapping of every op and print the per-op mapping table "
        "(= run --mapping search)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``archsim run``."""
    run_command.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """As ``archsim run``, with the mapping searched and the mapping table printed."""
    return run_command.run(args)
