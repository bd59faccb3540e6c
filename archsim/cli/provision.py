"""``archsim provision MODEL --prefill-designs D,.. --decode-designs D,.. --price D=USD ...``:
how many prefill and decode machines of which designs serve a request stream at the best
goodput under a cost and a power budget (:func:`archsim.serve.provision.provision`)."""

from __future__ import annotations

import argparse
import sys

from archsim.cli.common import (
    UsageError,
    add_request_flags,
    add_weight_sparsity_flag,
    non_empty,
    non_negative_int,
    positive_float,
    positive_int,
)
from archsim.serve.provision import provision

HELP = ("search prefill/decode pools (designs x counts) for the best goodput under a cost and "
        "power budget; see 'archsim provision --help'")
DESCRIPTION = ("Enumerate disaggregated deployments (prefill design x replicas x tp, decode "
               "design x replicas x tp), simulate each serving the request stream, drop those "
               "over the cost or power budget, print the best goodput and the cost-goodput "
               "frontier.")


def _names(text: str) -> list[str]:
    out = [t.strip() for t in text.split(",") if t.strip()]
    if not out:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return out


def _ints(text: str) -> list[int]:
    try:
        return [positive_int(t) for t in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 1, got "
                                         f"{text!r}") from None


def _price(text: str) -> tuple[str, float]:
    name, sep, usd = text.partition("=")
    try:
        v = float(usd)
    except ValueError:
        v = -1.0
    if not sep or not name or not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected DESIGN=USD_PER_DEVICE_HOUR (e.g. h100=4.0), "
                                         f"got {text!r}")
    return name, v


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Model, the pools' designs and counts, prices, budgets, SLO, request stream."""
    p.add_argument("model", help="zoo decoder (llama3-8b, ...) or a Hugging Face config.json")
    p.add_argument("--prefill-designs", type=_names, required=True, metavar="D[,D...]",
                   help="designs the prefill pool may run on")
    p.add_argument("--decode-designs", type=_names, required=True, metavar="D[,D...]",
                   help="designs the decode pool may run on")
    p.add_argument("--replicas", type=_ints, default=[1, 2], metavar="N[,N...]",
                   help="prefill replica counts searched (default 1,2)")
    p.add_argument("--decode-replicas", type=_ints, default=[1, 2], metavar="N[,N...]",
                   help="decode replica counts searched (default 1,2)")
    p.add_argument("--tp", type=_ints, default=[1], metavar="N[,N...]",
                   help="tensor-parallel degrees of a prefill replica searched (default 1)")
    p.add_argument("--decode-tp", type=_ints, metavar="N[,N...]",
                   help="tensor-parallel degrees of a decode replica (default --tp)")
    p.add_argument("--price", type=_price, action="append", default=[], metavar="D=USD",
                   help="price of one device-hour of design D (one per design; repeatable)")
    p.add_argument("--max-cost", type=positive_float, metavar="USD",
                   help="cost budget: USD per hour of all devices")
    p.add_argument("--max-power", type=positive_float, metavar="W",
                   help="power budget: average power of all devices at this load (W)")
    p.add_argument("--slo", default="ttft=2s,tpot=100ms",
                   help="SLO of the goodput (default ttft=2s,tpot=100ms)")
    p.add_argument("--find-capacity", action="store_true",
                   help="goodput = each deployment's capacity: the highest rate meeting the "
                   "SLO (a rate search each; else the stream's SLO-meeting requests/s)")
    add_request_flags(p)
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument("--a-format", type=non_empty, help="activation number format")
    p.add_argument("--w-format", type=non_empty, help="weight number format")
    add_weight_sparsity_flag(p)
    p.add_argument("--top", type=positive_int, default=10, help="rows of the table")


def run(args: argparse.Namespace) -> int:
    """Print the summary, the best deployments and the frontier; exit 1 when none fits."""
    prices = dict(args.price)
    if len(prices) != len(args.price):
        raise UsageError("--price names a design twice")
    found = provision(args.model, args.prefill_designs, args.decode_designs, prices=prices,
                      replicas=args.replicas, decode_replicas=args.decode_replicas, tp=args.tp,
                      decode_tp=args.decode_tp, max_cost_per_hour=args.max_cost,
                      max_power_w=args.max_power, slo=args.slo,
                      note=lambda line: print(line, file=sys.stderr),
                      rate=args.rate, duration=args.duration, trace=args.trace,
                      prompt=args.prompt, output=args.output, seed=args.seed,
                      a_format=args.a_format, w_format=args.w_format,
                      weight_sparsity=args.weight_sparsity,
                      find_capacity=args.find_capacity)
    print(found.summary())
    if found.best is None:
        print("no deployment within the budget", file=sys.stderr)
        return 1
    print(found.table(args.top))
    print("\ncost-goodput frontier (each cheaper one serves less)")
    print(found.frontier_text())
    return 0
