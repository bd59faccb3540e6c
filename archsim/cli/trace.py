"""``archsim trace CONFIG --model M --out trace.json``: simulate a model at cycle fidelity
and write a Chrome/Perfetto timeline (:func:`archsim.tracing.trace`)."""

from __future__ import annotations

import argparse

from archsim.cli.common import non_empty, positive_int
from archsim.outputs import check_output_path
from archsim.tracing import DEFAULT_MAX_EVENTS, trace

HELP = ("simulate a model at cycle fidelity and write a Chrome/Perfetto timeline; see "
        "'archsim trace --help'")
DESCRIPTION = ("Simulate a model at cycle fidelity and write a Chrome Trace Event JSON (one "
               "track per resource; open in Perfetto).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Design, workload, op filter, output and event budget."""
    p.add_argument("config", help="config YAML or reference-design name")
    p.add_argument("--model", required=True, help="zoo model name or a HF config.json")
    p.add_argument("--phase", choices=("prefill", "decode", "train", "inference"))
    p.add_argument("--batch", type=positive_int, default=1)
    p.add_argument("--seq", type=positive_int)
    p.add_argument("--context", type=positive_int)
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel devices")
    p.add_argument("--a-format", type=non_empty, help="activation number format (e.g. fp16, int8)")
    p.add_argument("--w-format", type=non_empty, help="weight number format (e.g. int4)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE", help="override a config value (repeatable)")
    p.add_argument("--op", help="only ops whose name contains this substring")
    p.add_argument("--out", required=True, help="output .json file")
    p.add_argument("--max-events", type=positive_int, default=None,
                   help=f"keep at most this many task events in total (earliest first); "
                   f"without it a trace estimated above {DEFAULT_MAX_EVENTS:,} events is "
                   f"refused before it starts")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    """Check the output path, write the trace, print one summary line."""
    check_output_path(args.out, "--out")
    s = trace(args.config, args.model, args.out, phase=args.phase, batch=args.batch,
              seq=args.seq, context=args.context, tp=args.tp, a_format=args.a_format,
              w_format=args.w_format, overrides=args.overrides, op_filter=args.op,
              max_events=args.max_events, progress=False if args.quiet else None)
    print(s.text())
    return 0
