"""``archsim plot KIND ...``: ``pareto DB``, ``heatmap DB --x KEY --y KEY``, ``breakdown
CONFIG --model M``, ``roofline CONFIG --model M`` (:mod:`archsim.explore.plots`); ``-o`` may
repeat (e.g. ``-o f.png -o f.svg``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archsim.api import evaluate, load, workload
from archsim.cli.common import positive_int
from archsim.explore.plots import (
    plot_component_breakdown,
    plot_heatmap,
    plot_op_breakdown,
    plot_pareto,
    plot_roofline,
)
from archsim.explore.spec import METRICS, ConstraintSpec
from archsim.explore.store import ResultStore
from archsim.outputs import PLOT_SUFFIXES, check_output_path

HELP = "plots: pareto | heatmap | breakdown | roofline; see 'archsim plot --help'"
DESCRIPTION = "Plots of sweeps and of single evaluations (PNG, SVG or PDF by the file suffix)."


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """One sub-command per plot kind, each with ``-o``."""
    sub = ap.add_subparsers(dest="kind", required=True)
    pp = sub.add_parser("pareto", help="Pareto front of a sweep store")
    pp.add_argument("db")
    pp.add_argument("--objectives", help="two comma-separated metrics (default: the spec's)")
    hp = sub.add_parser("heatmap", help="a metric over two axes of a sweep store")
    hp.add_argument("db")
    hp.add_argument("--x", required=True, help="axis key, e.g. units[0].rows")
    hp.add_argument("--y", required=True, help="axis key")
    hp.add_argument("--metric", default="latency_s")
    hp.add_argument("--reduce", choices=("min", "max", "mean"), default="min")
    kinds = [pp, hp]
    for name, help_ in (("breakdown", "per-op and per-component breakdown of one evaluation"),
                        ("roofline", "roofline of each unit with the ops as points")):
        q = sub.add_parser(name, help=help_)
        q.add_argument("config", help="config path or reference design name")
        q.add_argument("--model", required=True, help="zoo model or HF config.json")
        q.add_argument("--phase")
        q.add_argument("--batch", type=positive_int, default=1)
        q.add_argument("--seq", type=positive_int)
        q.add_argument("--context", type=positive_int)
        q.add_argument("--a-format")
        q.add_argument("--w-format")
        q.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
        if name == "breakdown":
            q.add_argument("--by", choices=("op", "component"), default="op")
            q.add_argument("--top", type=positive_int, default=25, help="ops shown (the rest summed)")
        kinds.append(q)
    for q in kinds:
        q.add_argument("-o", "--output", action="append", required=True,
                       help="output file (.png/.svg/.pdf); may repeat")


def run(args: argparse.Namespace) -> int:
    """Check every output, then draw the plot into each."""
    try:
        for out in args.output:     # every output is checked before any work starts
            check_output_path(out, "-o", PLOT_SUFFIXES)
        for out in args.output:
            _plot_one(args, out)
            print(f"wrote {out}")
    except (FileNotFoundError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _plot_one(args: argparse.Namespace, out: str) -> None:
    if args.kind in ("pareto", "heatmap"):
        if not Path(args.db).exists():
            raise FileNotFoundError(f"no such result store {args.db!r}")
        with ResultStore(args.db, readonly=True) as st:
            meta = st.meta("spec", {}) or st.meta("cosearch", {}) or {}
        cons = {k: ConstraintSpec(**v) for k, v in (meta.get("constraints") or {}).items()}
        if args.kind == "pareto":
            objs = ([o for o in args.objectives.split(",") if o] if args.objectives else
                    list(meta.get("objectives") or ["latency_s", "energy_j"]))[:2]
            bad = [o for o in objs if o not in METRICS]
            if len(objs) != 2 or bad:
                raise ValueError(f"expected two of {', '.join(METRICS)}, got {objs}")
            plot_pareto(args.db, objs, out, cons)
        else:
            if args.metric not in METRICS:
                raise ValueError(f"unknown metric {args.metric!r}; expected one of "
                                 f"{', '.join(METRICS)}")
            plot_heatmap(args.db, args.x, args.y, args.metric, out, cons, args.reduce)
        return
    acc = load(args.config, args.set)
    wl = workload(args.model, phase=args.phase, batch=args.batch, seq=args.seq,
                  context=args.context, a_format=args.a_format, w_format=args.w_format)
    res = evaluate(acc, wl)
    if args.kind == "roofline":
        plot_roofline(acc, wl, res, out)
    elif args.by == "op":
        plot_op_breakdown(res, out, args.top)
    else:
        plot_component_breakdown(res, out)
