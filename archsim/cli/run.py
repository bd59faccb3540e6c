"""``archsim run``: evaluate a model on a design; also a parallel plan on a cluster and
Timeloop inputs.

    archsim run [CONFIG] --model M [--phase ... --batch ... --set KEY=VALUE ...] [--json]
    archsim run dgx_h100 --model llama3-70b --phase train --tp 8 --pp 2 --microbatches 8
    archsim run timeloop:DIR [--problem prob.yaml] [--search]

Which of the three runs is chosen by the flags, not by peeking at the command line: a plan
flag (``--pp``, ``--dp``, ...) or a cluster as CONFIG is a parallel plan
(:func:`archsim.parallel.evaluate_plan`); ``timeloop:DIR`` as CONFIG or ``--timeloop ARCH``
evaluates Timeloop inputs (:func:`archsim.timeloop.evaluate_timeloop`); the Timeloop flags
(``--problem``, ``--ert``, ``--search`` ...) apply to Timeloop inputs only and the model
flags to models only. ``archsim map`` takes exactly these arguments.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from archsim.api import load, workload
from archsim.arch.accelerator import Accelerator
from archsim.arch.cluster import find_cluster
from archsim.cli.common import (
    Parser,
    ProgressBar,
    UsageError,
    add_attention_kernel_flag,
    add_kv_flags,
    add_runtime_flag,
    add_weight_group_flags,
    add_weight_sparsity_flag,
    kv_of,
    nm,
    non_empty,
    non_negative_int,
    positive_int,
)
from archsim.cli.plan import add_plan_flags, plan_flags_given, run_plan
from archsim.run_request import (
    DEFAULT_CONFIG,
    DEFAULT_MODEL,
    RunRequest,
    evaluate_request,
    memory_warning,
)
from archsim.timeloop import evaluate_timeloop
from archsim.zigzag import evaluate_zigzag

HELP = "evaluate a model on a design"

#: The flags of Timeloop inputs (``--timeloop ARCH`` or ``timeloop:DIR``), by dest.
TIMELOOP_DESTS = ("timeloop", "problem", "ert", "show_ert", "search", "time_budget", "seed",
                  "save_mapping", "stationary_resets")
#: Flags both kinds of input take.
SHARED_DESTS = ("cmd", "config", "json", "objective", "mapping")
#: The flags of ZigZag inputs, by dest, and the model flags they take.
ZIGZAG_DESTS = ("zigzag_accelerator", "zigzag_mapping")
ZIGZAG_SHARED = ("cmd", "json", "objective", "model", "batch")
MAPPING_MODES = ("default", "search")


def add_evaluation_flags(p: argparse.ArgumentParser, timeloop_inputs: bool = False) -> None:
    """The flags of every single-design evaluation (``run``, ``map``, ``gemm``);
    ``timeloop_inputs``: ``--objective`` and ``--mapping`` also serve Timeloop inputs (their
    default and the mapping file are resolved after parsing)."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. units[0].rows=64 (repeatable)")
    add_runtime_flag(p)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.add_argument("--fidelity", choices=("analytical", "cycle"), default="analytical",
                   help="analytical estimate (default, fast) or cycle-level simulation")
    if timeloop_inputs:
        p.add_argument("--objective", choices=("latency", "energy", "edp"), default=None,
                       help="what the op -> unit assignment minimises (default latency; edp "
                       "with Timeloop inputs, as Timeloop's mapper)")
        p.add_argument("--mapping", metavar="{default,search}", default=None,
                       help="default: each unit's configured dataflow; search: the mapper's "
                       "loop-nest search for matrix ops (spatial arrays); with Timeloop "
                       "inputs: a Timeloop mapping YAML")
    else:
        p.add_argument("--objective", choices=("latency", "energy", "edp"), default="latency",
                       help="what the op -> unit assignment minimises (default latency)")
        p.add_argument("--mapping", choices=MAPPING_MODES, default="default",
                       help="default: each unit's configured dataflow; search: the mapper's "
                       "loop-nest search for matrix ops (spatial arrays)")
    p.add_argument("--a-format", type=non_empty, help="activation number format (e.g. fp16, int8)")
    p.add_argument("--w-format", type=non_empty, help="weight number format (e.g. int4, ternary)")
    p.add_argument("--refine", type=non_negative_int, default=0, metavar="K",
                   help="with mapping search: re-rank each op's K best mappings with the "
                   "cycle simulator (default 0 = off)")
    p.add_argument("--constraints", metavar="YAML",
                   help="mapping constraints: fix/restrict unit, dataflow, factors, loop order "
                   "per op kind or layer glob (docs/mapper.md)")
    p.add_argument("--sparsity", type=nm, metavar="N:M",
                   help="N:M structured sparsity on the weights of every prunable layer "
                   "(forward and backward-data passes; e.g. 2:4, 2:8)")
    add_weight_sparsity_flag(p)
    add_weight_group_flags(p)


def add_timeloop_flags(p: argparse.ArgumentParser) -> None:
    """Timeloop inputs (docs/timeloop.md): ``--timeloop ARCH --problem PROB`` or
    ``timeloop:DIR`` as CONFIG."""
    g = p.add_argument_group("Timeloop inputs (docs/timeloop.md; CONFIG may be timeloop:DIR)")
    g.add_argument("--timeloop", metavar="ARCH", help="Timeloop architecture YAML")
    g.add_argument("--problem", metavar="PROB", help="Timeloop problem YAML")
    g.add_argument("--ert", metavar="ERT", help="Accelergy ERT or ERT_summary YAML (default: "
                   "each component priced by archsim's energy library from its class and "
                   "attributes)")
    g.add_argument("--show-ert", action="store_true",
                   help="print the energy reference table used (derived: with each value's "
                        "source)")
    g.add_argument("--search", action="store_true",
                   help="search a mapping even if one is given or the folder has one")
    g.add_argument("--time-budget", type=float, default=8.0, metavar="S",
                   help="search time in seconds (default 8)")
    g.add_argument("--seed", type=non_negative_int, default=0, help="search seed (default 0)")
    g.add_argument("--save-mapping", metavar="PATH",
                   help="write the evaluated mapping as Timeloop mapping YAML")
    g.add_argument("--stationary-resets", choices=("pre-2025", "post-2025"), default="pre-2025",
                   help="Timeloop's reuse rule for stationary steps (default: the rule of the "
                        "published reference outputs; see docs/timeloop.md). The search always "
                        "ranks mappings with the default rule")


def add_zigzag_flags(p: argparse.ArgumentParser) -> None:
    """ZigZag inputs (docs/zigzag.md): ``--zigzag-accelerator A.yaml --zigzag-mapping M.yaml``
    with ``--model`` (an ONNX file, read for shapes only, or a zoo model)."""
    g = p.add_argument_group("ZigZag inputs (docs/zigzag.md)")
    g.add_argument("--zigzag-accelerator", metavar="YAML",
                   help="ZigZag accelerator YAML (memories + operational_array); maps every "
                        "matrix layer of --model on it")
    g.add_argument("--zigzag-mapping", metavar="YAML",
                   help="ZigZag mapping YAML (spatial_mapping, memory_operand_links per "
                        "layer name / op type / default)")


def add_arguments(r: argparse.ArgumentParser) -> None:
    """The flags of ``archsim run`` (and ``archsim map``)."""
    r.add_argument("config", nargs="?", default=DEFAULT_CONFIG,
                   help=f"config YAML or reference-design name (default {DEFAULT_CONFIG})")
    r.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"zoo model name, a Hugging Face config.json or a folder holding one "
                        f"(default {DEFAULT_MODEL})")
    r.add_argument("--phase", choices=("prefill", "decode", "train", "inference"),
                   help="workload phase (default: prefill for LLMs, inference for CNNs)")
    r.add_argument("--batch", type=positive_int, default=1)
    r.add_argument("--seq", type=positive_int, help="tokens per sequence (prefill/train)")
    r.add_argument("--context", type=positive_int, help="KV-cache length (decode)")
    r.add_argument("--tp", type=positive_int, default=1,
                   help="tensor-parallel devices (transformers, Megatron-style sharding with "
                        "all-reduces over the design's GPU link; default 1)")
    r.add_argument("--kernels", choices=("fused", "eager_amp"), default="fused",
                   help="transformers: 'fused' (one kernel per layer op, as a tuned engine "
                        "runs them; default) or 'eager_amp' (PyTorch eager + autocast on fp32 "
                        "parameters, as a Hugging Face script runs them: casts, fp32 norms, "
                        "dropout, the activation op by op, the loss; --a-format is the "
                        "autocast format, default bf16)")
    r.add_argument("--moe-routing", metavar="ROUTING", default=None,
                   help="mixture-of-experts zoo models: run each MoE block's routed experts as "
                        "one fused call (vLLM's fused MoE layer; GPUs with fused_moe "
                        "constants) with this routing: 'balanced' or 'power_law:ALPHA' (skewed, "
                        "e.g. power_law:1.2); default: separate expert ops, balanced")
    add_attention_kernel_flag(r, "sdpa")
    r.add_argument("--max-ops", type=positive_int, default=None,
                   help="op rows in the text table (default 40; 'run' only, not with --json)")
    add_evaluation_flags(r, timeloop_inputs=True)
    add_plan_flags(r)
    add_kv_flags(r.add_argument_group("KV-cache techniques (prefill / decode of a transformer; "
                                      "docs/serving.md)"), block_size=True)
    add_timeloop_flags(r)
    add_zigzag_flags(r)


def _changed(args: argparse.Namespace, dests: tuple[str, ...] | None, skip: tuple[str, ...]
             ) -> list[str]:
    """Flags of ``args`` set away from their defaults (only ``dests``, or all but ``skip``)."""
    p = Parser(prog="archsim run")
    add_arguments(p)
    defaults = vars(p.parse_args([]))
    return ["--" + d.replace("_", "-") for d, v in vars(args).items()
            if d in defaults and d not in skip and (dests is None or d in dests)
            and v != defaults[d]]


def run(args: argparse.Namespace) -> int:
    """``archsim run`` / ``archsim map``: Timeloop or ZigZag inputs, a parallel plan or one
    model."""
    if args.zigzag_accelerator is not None or args.zigzag_mapping is not None:
        bad = _changed(args, None, ZIGZAG_DESTS + ZIGZAG_SHARED)
        if bad:
            raise UsageError(f"{', '.join(bad)} cannot be used with ZigZag inputs")
        return run_zigzag(args)
    if args.timeloop is not None or str(args.config).startswith("timeloop:"):
        bad = _changed(args, None, TIMELOOP_DESTS + SHARED_DESTS + ZIGZAG_DESTS)
        if bad:
            raise UsageError(f"{', '.join(bad)} cannot be used with Timeloop inputs")
        return run_timeloop(args)
    bad = _changed(args, TIMELOOP_DESTS, ())
    if bad:
        raise UsageError(f"{', '.join(bad)} applies to Timeloop inputs only (--timeloop ARCH "
                         f"or timeloop:DIR)")
    if args.mapping is not None and args.mapping not in MAPPING_MODES:
        raise UsageError(f"argument --mapping: invalid choice: {args.mapping!r} (choose from "
                         f"{', '.join(repr(m) for m in MAPPING_MODES)})")
    if find_cluster(args.config) is not None or plan_flags_given(args, overlap=False):
        if getattr(args, "moe_routing", None):
            raise UsageError("--moe-routing applies to one device's run, not to a cluster "
                             "plan (plans take --moe-imbalance)")
        return run_plan(args)
    return evaluate_and_print(args, request_from_args(args))


def request_from_args(args: argparse.Namespace) -> RunRequest:
    """The :class:`RunRequest` of parsed ``run``/``map``/``gemm`` flags."""
    base = RunRequest(cmd=args.cmd, config=args.config, batch=args.batch,
                      a_format=args.a_format, w_format=args.w_format, sparsity=args.sparsity,
                      weight_sparsity=args.weight_sparsity, w_group_size=args.w_group_size,
                      act_order=args.act_order,
                      overrides=tuple(args.overrides), fidelity=args.fidelity,
                      objective=args.objective or "latency", mapping=args.mapping or "default",
                      constraints=args.constraints, refine=args.refine)
    if args.cmd == "gemm":
        return replace(base, m=args.m, n=args.n, k=args.k)
    return replace(base, model=args.model, phase=args.phase, seq=args.seq,
                   context=args.context, tp=args.tp, kernels=args.kernels,
                   moe_routing=args.moe_routing,
                   attention_kernel=args.attention_kernel or "sdpa",
                   overlap=getattr(args, "overlap", None) or "none", kv=kv_of(args),
                   block_size=args.block_size)


def cold_start_note() -> None:
    """Say on stderr that the simulator kernels compile (called when Numba starts
    compiling one: ``run_request.compile_notice``)."""
    print("note: first cycle-level run: compiling the simulator kernels (~5-30 s "
          "on 2 cores, the most with DRAM timing; cached for later runs)", file=sys.stderr)


def evaluate_and_print(args: argparse.Namespace, req: RunRequest) -> int:
    """Evaluate ``req`` and print the result: JSON, the mapping table (``map``) or the
    result table (``run``/``gemm``); a workload that does not fit is a warning."""
    acc: Accelerator = load(req.config, req.overrides)
    bar = ProgressBar("mapping ops")
    res = evaluate_request(req, acc, on_compile=cold_start_note, progress=bar.update)
    bar.close()
    warn = memory_warning(res, acc)
    if warn:
        print(f"warning: {warn}", file=sys.stderr)
    max_ops = getattr(args, "max_ops", None)
    if max_ops is not None and (args.json or req.cmd == "map"):
        print(f"warning: --max-ops {max_ops} sets the rows of run's text table; "
              f"{'--json' if args.json else 'map'} prints every op; ignored", file=sys.stderr)
    if args.json:
        print(res.to_json())
    elif req.cmd == "map":
        print(res.mapping_table())
    else:
        print(res.table(max_ops or 40))
    return 0


def run_timeloop(args: argparse.Namespace) -> int:
    """Timeloop inputs: ``map --timeloop ARCH --problem PROB`` or ``run timeloop:DIR``."""
    folder = None
    if str(args.config).startswith("timeloop:"):
        folder = str(args.config)[len("timeloop:"):]
    elif not args.problem:
        print(f"archsim {args.cmd} --timeloop: --problem is required", file=sys.stderr)
        return 2
    if args.time_budget <= 0:
        print("archsim: --time-budget must be > 0 seconds", file=sys.stderr)
        return 2
    bar = ProgressBar("s of mapping search")
    tl = evaluate_timeloop(args.timeloop, args.problem, folder=folder, mapping=args.mapping,
                           ert=args.ert, search=args.search, objective=args.objective or "edp",
                           time_budget_s=args.time_budget, seed=args.seed,
                           stationary_resets=args.stationary_resets, progress=bar.update)
    bar.close()
    if args.save_mapping:
        Path(args.save_mapping).write_text(tl.mapping_yaml())
    if args.show_ert and not args.json:
        print(tl.ert_text() + "\n")
    if tl.search_note and not args.json:
        print(tl.search_note)
    print(tl.to_json() if args.json else tl.stats_text())
    return 0 if tl.result.feasible else 1


def run_zigzag(args: argparse.Namespace) -> int:
    """ZigZag inputs: ``map --zigzag-accelerator A.yaml --zigzag-mapping M.yaml --model X``."""
    if args.zigzag_accelerator is None or args.zigzag_mapping is None:
        raise UsageError("ZigZag inputs need both --zigzag-accelerator and --zigzag-mapping")
    wl = workload(args.model, batch=args.batch)
    bar = ProgressBar("layers")
    run_ = evaluate_zigzag(args.zigzag_accelerator, args.zigzag_mapping, wl,
                           objective=args.objective or "energy", progress=bar.update)
    bar.close()
    print(run_.to_json() if args.json else run_.table())
    return 0
