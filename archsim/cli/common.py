"""What every ``archsim`` subcommand shares: the one-line argument parser, flag types and
the single error path.

The error path (:func:`guarded`) is the only place where the CLI turns exceptions into
messages and exit codes:

* :class:`~workloads.errors.ArchsimError` (every user mistake) -> its rendered message, exit 2;
* ``KeyboardInterrupt`` (Ctrl-C) -> ``interrupted``, exit 130 (128 + SIGINT, the shell's
  convention);
* limits met while reading user input that Python reports as built-in exceptions
  (file-system errors, SQLite errors, ``RecursionError`` from absurdly nested input,
  ``MemoryError``, ``OverflowError`` from values outside the float range) -> one line naming
  the file or value when known, exit 2.

Any other exception is a program bug and is left to raise with its traceback (house style).
Output files are written through :func:`archsim.outputs.atomic_output` (whole or not at all).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
import warnings
from collections.abc import Callable
from typing import NoReturn, TextIO

from archsim.arch.gpu.host import RUNTIMES
from archsim.diagnostics import print_warnings
from archsim.workloads.errors import ArchsimError, Problem, WorkloadError
from archsim.workloads.kvtech import KVTechniques
from archsim.workloads.ops import ATTENTION_KERNELS

__all__ = ["Parser", "ProgressBar", "add_runtime_flag", "add_attention_kernel_flag", "UsageError", "positive_int", "non_negative_int", "positive_float",
           "ratio_at_least_one", "nm", "non_empty", "guarded", "EXIT_USAGE",
           "EXIT_INTERRUPT"]

#: Exit code of a user mistake (bad input, flag, file), as argparse uses.
EXIT_USAGE = 2
#: Exit code after Ctrl-C: 128 + SIGINT (2), the POSIX shells' convention.
EXIT_INTERRUPT = 130


class ProgressBar:
    """``\r[#####     ] 12/174 mapping ops`` on stderr, redrawn as :meth:`update` is called,
    once the work has taken longer than ``after_s`` seconds, and only on a terminal (logs
    and pipes stay clean). :meth:`close` ends the line if one was drawn."""

    def __init__(self, what: str, after_s: float = 2.0, stream: TextIO | None = None) -> None:
        self.what = what
        self.after_s = after_s
        self.stream = stream or sys.stderr
        self.t0 = time.perf_counter()
        self.drawn = False

    def update(self, done: int, total: int) -> None:
        """Redraw with ``done`` of ``total`` finished."""
        if time.perf_counter() - self.t0 < self.after_s or not self.stream.isatty():
            return
        frac = done / total if total else 1.0
        self.stream.write(f"\r[{'#' * int(frac * 30):<30}] {done}/{total} {self.what}")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """End the bar's line (if it was drawn)."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


class UsageError(Exception):
    """A flag combination a command refuses after parsing (argparse cannot express it, e.g.
    ``--problem`` without Timeloop inputs). :func:`archsim.cli.main` reports it through the
    command's own parser: ``archsim CMD: error: MESSAGE (see 'archsim CMD --help')``, exit 2.
    """


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line (plus a hint) and exit 2."""

    def error(self, message: str) -> NoReturn:  # one line, exit 2
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _int_at_least(text: str, low: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
    if v < low:
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {v}")
    return v


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (e.g. ``--refine``, where 0 means off)."""
    return _int_at_least(text, 0)


def _finite_float(text: str, bound: str, ok: Callable[[float], bool]) -> float:
    """A finite float for which ``ok`` holds; ``bound`` says which (``> 0``, ``>= 1``)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number {bound}, got {text!r}") from None
    if not (ok(v) and v < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number {bound}, got {text!r}")
    return v


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (rates, durations, fractions)."""
    return _finite_float(text, "> 0", lambda v: v > 0)


def zero_fraction(text: str) -> float:
    """argparse type: a fraction of zero weights in [0, 1)."""
    return _finite_float(text, "in [0, 1)", lambda v: 0 <= v < 1)


def add_weight_sparsity_flag(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--weight-sparsity F`` (run, map, gemm, plan, serve): docs/gpu.md, "Unstructured
    weight sparsity"."""
    p.add_argument("--weight-sparsity", type=zero_fraction, default=0.0, metavar="F",
                   help="fraction F of zero weights (unstructured) in the linear layers, run "
                   "as sparse loads + dense tensor-core MMA (Flash-LLM/SpInfer; GPU designs, "
                   "inference; e.g. 0.6)")


def add_kv_flags(g: argparse.ArgumentParser | argparse._ArgumentGroup,
                 block_size: bool = False) -> None:
    """The KV-cache technique flags (``serve``, ``run``, ``plan``: :mod:`workloads.kvtech`);
    ``block_size``: also ``--block-size`` (``serve`` has it among its scheduler flags)."""
    g.add_argument("--prefix-hit-rate", type=float, default=0.0, metavar="H",
                   help="share of every prompt found in the prefix cache, [0, 1): its prefill "
                   "is skipped and its KV blocks shared (SGLang RadixAttention)")
    g.add_argument("--kv-remat", action="store_true",
                   help="cache X instead of K and V; recompute K/V every decode step (XQuant)")
    g.add_argument("--topk-blocks", type=int, default=0, metavar="K",
                   help="decode attends to the K most relevant KV blocks after a selection "
                   "pass (Quest)")
    g.add_argument("--kv-offload-gb", type=float, default=0.0, metavar="GB",
                   help="host memory per device for KV blocks beyond the device's; they "
                   "stream back over the host link each decode step (FlexGen)")
    if block_size:
        g.add_argument("--block-size", type=positive_int, default=16,
                       help="KV block in tokens (top-k's blocks; default 16, vLLM's)")


def kv_of(args: argparse.Namespace) -> KVTechniques:
    """The :class:`~workloads.kvtech.KVTechniques` of the parsed KV flags (``--block-size``
    without ``--topk-blocks``, where it would change nothing, is refused)."""
    if getattr(args, "block_size", 16) != 16 and not args.topk_blocks:
        raise WorkloadError(Problem("sets top-k's KV blocks: it applies only with "
                                    "--topk-blocks", "--block-size"))
    return KVTechniques(args.prefix_hit_rate, args.kv_remat, args.topk_blocks,
                        args.kv_offload_gb)


def add_weight_group_flags(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--w-group-size G`` and ``--act-order`` (run, map, gemm, plan, serve): docs/gpu.md,
    "Act-order (permuted) group quantisation under tensor parallelism"."""
    p.add_argument("--w-group-size", type=non_negative_int, default=0, metavar="G",
                   help="group-wise integer weights: one scale + zero point per G weights "
                   "along K (GPTQ/AWQ; e.g. 128)")
    p.add_argument("--act-order", action="store_true",
                   help="GPTQ act-order as vLLM runs it: pre-permuted weights, the input "
                   "permuted per GEMM, all groups' scales on every TP rank (no gather)")


def ratio_at_least_one(text: str) -> float:
    """argparse type: a finite number >= 1 (imbalance factors, oversubscription)."""
    return _finite_float(text, ">= 1", lambda v: v >= 1)


def nm(text: str) -> tuple[int, int]:
    """argparse type: an N:M sparsity pattern with integers 0 < N <= M."""
    parts = text.split(":")
    try:
        n, m = (int(x) for x in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected N:M with integers 0 < N <= M, got {text!r}") from None
    if not 0 < n <= m:
        raise argparse.ArgumentTypeError(f"expected N:M with integers 0 < N <= M, got {text!r}")
    return n, m


def non_empty(text: str) -> str:
    """argparse type: a non-blank string (``--w-format ''`` is a mistake, not 'unset')."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a non-empty value")
    return text


# ---- the error path -------------------------------------------------------------------------
def _os_message(exc: OSError) -> str:
    what = exc.strerror or str(exc)
    name = exc.filename
    return f"error: {name}: {what}" if name else f"error: {what}"


def guarded(fn: Callable[[], int], stderr: TextIO | None = None) -> int:
    """Run a command body and map every failure a user can cause to (message, exit code).

    Returns the body's exit code, 2 after a reported error, 130 after Ctrl-C.
    """
    err = stderr or sys.stderr

    def say(msg: str) -> None:
        print(msg, file=err)

    try:
        with warnings.catch_warnings():
            print_warnings(err)
            return int(fn())
    except ArchsimError as exc:
        say(exc.render())
    except KeyboardInterrupt:
        say("interrupted")
        return EXIT_INTERRUPT
    except sqlite3.Error as exc:          # a store we opened turned out unusable mid-run
        say(f"error: result store: {exc}")
    except RecursionError:
        say("error: input nested too deeply (Python's recursion limit was reached); "
            "expected a flat config or model file")
    except MemoryError:
        say("error: out of memory; lower the problem size (batch, seq, sweep grid) or use "
            "--fidelity analytical")
    except OverflowError as exc:
        say(f"error: numeric overflow ({exc}); an input value is outside the range any "
            f"hardware has — check the config values and --set overrides")
    except BrokenPipeError:               # stdout piped into `head` and closed: the reader
        raise                             # is done; entry() exits quietly, not as an error
    except OSError as exc:                # file-system trouble outside a specific check
        say(_os_message(exc))
    return EXIT_USAGE


class _RuntimeOverride(argparse.Action):
    """``--runtime X``: stores X and adds the override ``units[0].runtime=X`` after any
    ``--set`` values (a new list: the parser's default list is never mutated)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.overrides = [*(getattr(namespace, "overrides", None) or []),
                               f"units[0].runtime={values}"]


def add_attention_kernel_flag(p: argparse.ArgumentParser, default: str) -> None:
    """``--attention-kernel {sdpa,paged}``: how the Attention ops are called; ``default``
    is what the command does without the flag (``run``/``plan``: sdpa; ``serve``: paged
    where the design models it). Stored as None when not given."""
    p.add_argument("--attention-kernel", choices=ATTENTION_KERNELS, default=None,
                   help="attention call (fused-attention designs): sdpa = one FlashAttention "
                        "call on contiguous K/V (PyTorch SDPA; the eager, event-timed model); "
                        "paged = a serving framework's paged-KV backend (vLLM's FlashAttention "
                        "backend: the call also writes the new K/V into the cache; GPUs with "
                        "paged_attention constants: gpu/h100 and gpu/h200 FA3, gpu/a100 FA2, "
                        f"gpu/b200 and gpu/gb200 FA4). Default: {default} "
                        "(docs/gpu.md 'FlashAttention as vLLM calls it')")


def add_runtime_flag(p: argparse.ArgumentParser) -> None:
    """``--runtime``: the GPU runtime protocol (``arch/gpu/host.py``); needs ``--set``'s
    ``overrides`` destination on the same parser."""
    p.add_argument("--runtime", choices=tuple(RUNTIMES), action=_RuntimeOverride,
                   help="GPU runtime protocol (tensor-core GPU designs; = --set "
                        "units[0].runtime=X): ideal = each kernel launched alone, device time "
                        "only (default: the config's runtime, ideal in every reference "
                        "config); cuda_graph / eager / eager_hf = kernels queued back to back "
                        "(launch_b2b_us each) plus that stack's host cost per op, the wall "
                        "a launch queue (docs/gpu.md 'Runtime protocols')")


def add_request_flags(g: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The request stream's flags that ``serve`` and ``provision`` share: ``--rate``,
    ``--duration``, ``--trace``, ``--prompt``, ``--output`` (archsim.serve.requests)."""
    g.add_argument("--rate", type=positive_float, help="mean arrival rate (requests/s)")
    g.add_argument("--duration", type=positive_float, help="arrival window (s)")
    g.add_argument("--trace", help="CSV/JSONL trace or a shipped trace name")
    g.add_argument("--prompt", default="512", help="prompt length: N, uniform:A:B, "
                   "lognormal:MEDIAN:SIGMA")
    g.add_argument("--output", default="128", help="output length (same forms)")
