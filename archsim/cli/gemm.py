"""``archsim gemm``: evaluate one GEMM ``C[M,N] = A[M,K] @ W[K,N]`` on a design."""

from __future__ import annotations

import argparse

from archsim.cli.common import positive_int
from archsim.cli.run import add_evaluation_flags, evaluate_and_print, request_from_args

HELP = "evaluate one GEMM C[M,N] = A[M,K] @ W[K,N]"


def add_arguments(g: argparse.ArgumentParser) -> None:
    """The design, the GEMM's dimensions and the evaluation flags."""
    g.add_argument("config", help="config YAML or reference-design name")
    g.add_argument("--m", type=positive_int, required=True)
    g.add_argument("--n", type=positive_int, required=True)
    g.add_argument("--k", type=positive_int, required=True)
    g.add_argument("--batch", type=positive_int, default=1)
    add_evaluation_flags(g)


def run(args: argparse.Namespace) -> int:
    """Evaluate the GEMM and print its result table (or JSON)."""
    return evaluate_and_print(args, request_from_args(args))
