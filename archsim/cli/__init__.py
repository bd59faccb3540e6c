"""The ``archsim`` command line: a package of thin commands over the library.

Each subcommand is one module of this package that exports

* ``HELP``: the one line ``archsim --help`` shows (and ``DESCRIPTION``, optional: the
  paragraph ``archsim CMD --help`` shows);
* ``add_arguments(parser) -> None``: its flags, on the sub-parser it is given;
* ``run(args) -> int``: turn the parsed flags into typed library calls, print, return the
  exit code,

and is listed once in :data:`COMMANDS`. Adding a command = one module + one row there.

Every user mistake (bad config, flag, model, format) prints one message naming the location
and what was expected, and exits with code 2 — never a traceback (:func:`common.guarded`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from archsim.api import VERSION
from archsim.cli import (
    calibrate,
    compare,
    cosearch,
    gemm,
    list_,
    map_,
    plan,
    plot,
    provision,
    report,
    rerun,
    results,
    run,
    serve,
    sweep,
    trace,
    validate,
    validation,
)
from archsim.cli.common import Parser, UsageError, guarded

__all__ = ["COMMANDS", "build_parser", "main", "entry"]

#: The subcommands, in the order ``archsim --help`` lists them: name -> command module.
COMMANDS: dict[str, ModuleType] = {
    "map": map_, "run": run, "gemm": gemm, "validate": validate, "validation": validation,
    "sweep": sweep, "results": results, "trace": trace, "plan": plan, "calibrate": calibrate,
    "serve": serve, "cosearch": cosearch, "plot": plot, "report": report, "rerun": rerun,
    "compare": compare, "provision": provision, "list": list_,
}


def _build() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    ap: argparse.ArgumentParser = Parser(prog="archsim", description="Cycle-level models of AI accelerators: latency, "
                "energy and area of a network on a design.")
    ap.add_argument("--version", action="version", version=f"archsim {VERSION}")
    sub = ap.add_subparsers(dest="cmd")
    parsers: dict[str, argparse.ArgumentParser] = {}
    for name, mod in COMMANDS.items():
        p = sub.add_parser(name, help=mod.HELP, description=getattr(mod, "DESCRIPTION", None))
        mod.add_arguments(p)
        parsers[name] = p
    return ap, parsers


def build_parser() -> argparse.ArgumentParser:
    """The ``archsim`` parser: one sub-parser per entry of :data:`COMMANDS`."""
    return _build()[0]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse an ``archsim`` command line. Usage errors exit 2 through argparse (an argument no
    command takes is reported by that command's own parser); ``args.cmd`` is None without a
    command."""
    return _parse(argv)[0]


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    ap, parsers = _build()
    args, extra = ap.parse_known_args(list(argv))
    own = parsers.get(args.cmd, ap)
    if extra:
        own.error(f"unrecognized arguments: {' '.join(extra)}")
    return args, own


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``archsim ARGV`` (default ``sys.argv[1:]``); returns the exit code."""
    args, own = _parse(sys.argv[1:] if argv is None else argv)
    if args.cmd is None:
        own.print_help()
        return 0

    def body() -> int:
        try:
            return COMMANDS[args.cmd].run(args)
        except UsageError as exc:       # a flag combination the command refuses
            own.error(str(exc))
    return guarded(body)


def entry() -> None:
    """Console-script entry point."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:     # output piped into `head` and closed: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)
