"""The ``archsim`` command line: a thin shell over :mod:`archsim.api`.

Every user mistake (bad config, flag, model, format) prints one message naming the
location and what was expected, and exits with code 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from archsim.cli_common import Parser as _Parser
from archsim.cli_common import guarded
from archsim.cli_common import nm as _nm
from archsim.cli_common import non_empty as _non_empty
from archsim.cli_common import non_negative_int as _non_negative_int
from archsim.cli_common import positive_int as _positive_int
from archsim.workloads.errors import ArchsimError

DEFAULT_CONFIG = "tpu_like"
DEFAULT_MODEL = "gpt2-small"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. units[0].rows=64 (repeatable)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.add_argument("--fidelity", choices=("analytical", "cycle"), default="analytical",
                   help="analytical estimate (default, fast) or cycle-level simulation")
    p.add_argument("--objective", choices=("latency", "energy", "edp"), default="latency",
                   help="what the op -> unit assignment minimises (default latency)")
    p.add_argument("--mapping", choices=("default", "search"), default="default",
                   help="default: each unit's configured dataflow; search: the mapper's "
                   "loop-nest search for matrix ops (spatial arrays)")
    p.add_argument("--a-format", type=_non_empty, help="activation number format (e.g. fp16, int8)")
    p.add_argument("--w-format", type=_non_empty, help="weight number format (e.g. int4, ternary)")
    p.add_argument("--refine", type=_non_negative_int, default=0, metavar="K",
                   help="with mapping search: re-rank each op's K best mappings with the "
                   "cycle simulator (default 0 = off)")
    p.add_argument("--constraints", metavar="YAML",
                   help="mapping constraints: fix/restrict unit, dataflow, factors, loop order "
                   "per op kind or layer glob (docs/mapper.md)")
    p.add_argument("--sparsity", type=_nm, metavar="N:M",
                   help="N:M structured sparsity on the weights of every prunable layer "
                   "(forward and backward-data passes; e.g. 2:4, 2:8)")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="archsim", description="Cycle-level models of AI accelerators: latency, "
                 "energy and area of a network on a design.")
    sub = ap.add_subparsers(dest="cmd", parser_class=_Parser)

    mp = sub.add_parser("map", help="search the best mapping of every op and print the "
                        "per-op mapping table (= run --mapping search)")
    r = sub.add_parser("run", help="evaluate a model on a design")
    r.add_argument("config", nargs="?", default=DEFAULT_CONFIG,
                   help=f"config YAML or reference-design name (default {DEFAULT_CONFIG})")
    r.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"zoo model name or a Hugging Face config.json (default {DEFAULT_MODEL})")
    r.add_argument("--phase", choices=("prefill", "decode", "train", "inference"),
                   help="workload phase (default: prefill for LLMs, inference for CNNs)")
    r.add_argument("--batch", type=_positive_int, default=1)
    r.add_argument("--seq", type=_positive_int, help="tokens per sequence (prefill/train)")
    r.add_argument("--context", type=_positive_int, help="KV-cache length (decode)")
    r.add_argument("--tp", type=_positive_int, default=1,
                   help="tensor-parallel devices (transformers, Megatron-style sharding with "
                        "all-reduces over the design's GPU link; default 1)")
    r.add_argument("--kernels", choices=("fused", "eager_amp"), default="fused",
                   help="transformers: 'fused' (one kernel per layer op, as a tuned engine "
                        "runs them; default) or 'eager_amp' (PyTorch eager + autocast on fp32 "
                        "parameters, as a Hugging Face script runs them: casts, fp32 norms, "
                        "dropout, the activation op by op, the loss; --a-format is the "
                        "autocast format, default bf16)")
    r.add_argument("--max-ops", type=_positive_int, default=40, help="op rows in the text table")
    _common(r)
    from archsim.plan_cmd import add_run_args
    add_run_args(r)
    for a in r._actions[1:]:   # 'map' takes exactly the arguments of 'run'
        mp._add_action(a)

    g = sub.add_parser("gemm", help="evaluate one GEMM C[M,N] = A[M,K] @ W[K,N]")
    g.add_argument("config", help="config YAML or reference-design name")
    g.add_argument("--m", type=_positive_int, required=True)
    g.add_argument("--n", type=_positive_int, required=True)
    g.add_argument("--k", type=_positive_int, required=True)
    g.add_argument("--batch", type=_positive_int, default=1)
    _common(g)

    v = sub.add_parser("validate", help="check config files; report every problem")
    v.add_argument("configs", nargs="+")
    v.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")

    va = sub.add_parser("validation", help="compare predictions with every reference figure; "
                        "exit 1 if one leaves its tolerance")
    va.add_argument("--family", action="append", help="only this family (repeatable)")
    va.add_argument("--out", help="write the markdown report here (e.g. docs/validation.md)")
    va.add_argument("--plot", help="write the predicted-vs-reference scatter plot (PNG/SVG)")

    sub.add_parser("sweep", help="run a design-space sweep from a YAML spec into a SQLite "
                   "store (resumable); see 'archsim sweep --help'", add_help=False)
    sub.add_parser("results", help="export or filter a sweep's result store; see "
                   "'archsim results --help'", add_help=False)

    sub.add_parser("trace", help="simulate a model at cycle fidelity and write a Chrome/Perfetto "
                   "timeline; see 'archsim trace --help'", add_help=False)
    sub.add_parser("plan", help="search parallel plans of a model on a cluster; see "
                   "'archsim plan --help'", add_help=False)
    sub.add_parser("calibrate", help="fit a GPU config to measured silicon rows (JSON lines); "
                   "see 'archsim calibrate --help'", add_help=False)
    sub.add_parser("serve", help="simulate LLM serving (traces, batching, KV, SLOs, energy per "
                   "token); see 'archsim serve --help'", add_help=False)
    sub.add_parser("cosearch", help="co-search networks and (heterogeneous) hardware under "
                   "design specs; see 'archsim cosearch --help'", add_help=False)
    sub.add_parser("plot", help="plots: pareto | heatmap | breakdown | roofline; see "
                   "'archsim plot --help'", add_help=False)
    sub.add_parser("report", help="static HTML report of a sweep store; see "
                   "'archsim report --help'", add_help=False)

    sub.add_parser("rerun", help="re-run what produced a 'run --json' result and check it "
                   "reproduces; see 'archsim rerun --help'", add_help=False)
    sub.add_parser("compare", help="one model on several designs, side by side (--csv); see "
                   "'archsim compare --help'", add_help=False)
    ls = sub.add_parser("list", help="list reference configs, clusters, zoo models or number "
                        "formats")
    ls.add_argument("what", choices=("configs", "clusters", "models", "formats"))
    return ap


_EXPLORE = {"sweep": "sweep_main", "results": "results_main", "cosearch": "cosearch_main",
            "plot": "plot_main", "report": "report_main", "trace": "trace_main",
            "plan": "plan_main", "calibrate": "main", "serve": "main",
            "rerun": "rerun_main", "compare": "compare_main"}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if (argv[:1] == ["map"] and "--timeloop" in argv) or (
            len(argv) > 1 and argv[0] == "run" and argv[1].startswith("timeloop:")):
        from archsim.timeloop_cmd import main as timeloop_main  # Timeloop inputs (issue 17)
        return guarded(lambda: int(timeloop_main(argv)))
    if argv and argv[0] in _EXPLORE:   # these subcommands have their own parsers
        if argv[0] == "trace":
            from archsim.trace_cmd import main as entry_fn
        elif argv[0] == "plan":
            from archsim.plan_cmd import main as entry_fn
        elif argv[0] == "calibrate":
            from archsim.calibrate_cmd import main as entry_fn
        elif argv[0] == "serve":
            from archsim.serve.cli import main as entry_fn
        elif argv[0] in ("rerun", "compare"):
            import archsim.run_cmd as run_cmd

            entry_fn = getattr(run_cmd, _EXPLORE[argv[0]])
        else:
            import archsim.explore as explore

            entry_fn = getattr(explore, _EXPLORE[argv[0]])
        return guarded(lambda: int(entry_fn(argv[1:])))
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.cmd is None:
        ap.print_help()
        return 0
    return guarded(lambda: _dispatch(args))


def _dispatch(args: argparse.Namespace) -> int:
    import archsim

    if args.cmd == "list":
        return _list(args.what)
    if args.cmd == "validation":
        return _validation(args)
    if args.cmd == "validate":
        bad = 0
        for c in args.configs:
            try:
                acc = archsim.load(c, args.overrides)
            except ArchsimError as exc:
                print(exc.render(), file=sys.stderr)
                bad += 1
                continue
            units = ", ".join(f"{u.name} ({u.kind})" for u in acc.units)
            print(f"ok  {c}: {acc.name} — {units}")
        return 2 if bad else 0
    if args.cmd in ("run", "map"):
        from archsim.plan_cmd import run_plan, wants_plan
        if wants_plan(args):
            return run_plan(args)
    acc = archsim.load(args.config, args.overrides)
    from archsim.run_cmd import build_workload, evaluate_checked

    wl = build_workload(args, acc)
    res = evaluate_checked(args, acc, wl)
    mem = res.extra.get("memory")
    if mem and mem["fits"] is False:
        print(f"warning: {wl.name} ({wl.phase}) needs {mem['resident_bytes'] / 1e9:.4g} GB "
              f"resident (weights, KV cache, training state) but {acc.name} has "
              f"{mem['capacity_bytes'] / 1e9:.4g} GB of off-chip memory; the result assumes "
              f"it fits", file=sys.stderr)
    if args.json:
        print(res.to_json())
    elif args.cmd == "map":
        print(res.mapping_table())
    else:
        print(res.table(getattr(args, "max_ops", 40)))
    return 0


def _validation(args: argparse.Namespace) -> int:
    import os

    from archsim import validation as v
    from archsim.workloads.errors import Problem, SpecError

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
        from archsim.cli_common import write_text_atomic

        write_text_atomic(args.out, text, "--out")
    bad = [c for c in comps if not c.ok]
    for c in bad:
        print(f"OUT OF TOLERANCE: {c.family} {c.design} {c.figure}: ours {c.ours:.4g} vs "
              f"{c.reference_text} {c.unit} ({c.error:+.1%}, tolerance ±{c.tolerance:.0%})",
              file=sys.stderr)
    print(f"{len(comps) - len(bad)} of {len(comps)} comparisons within tolerance"
          + (f"; report: {args.out}" if args.out else ""))
    return 1 if bad else 0


def _list(what: str) -> int:
    import archsim

    if what == "configs":
        base = archsim.config_dir()
        for p in archsim.list_configs():
            print(p.relative_to(base.parent).as_posix())
    elif what == "clusters":               # archsim plan / run with a parallel plan
        from archsim.arch.cluster import list_clusters
        for p in list_clusters():
            print(p.relative_to(archsim.config_dir().parent).as_posix())
    elif what == "models":
        from archsim.workloads.zoo import model_names

        for n in model_names():
            print(n)
    else:
        from archsim.workloads.formats import FORMATS

        for f in FORMATS.values():
            print(f"{f.name:<10} {f.bits_per_element:g} bits ({f.kind})")
    return 0


def entry() -> None:
    """Console-script entry point."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:     # output piped into `head` and closed: not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    entry()
