"""``archsim plan`` (search parallel plans) and the parallel-plan path of ``archsim run``.

    archsim plan h100_pod64 --model llama3-70b --devices 64 --phase train --batch 256 --seq 4096
    archsim plan dgx_h100 --model deepseek-v3 --devices 16 --phase decode --batch 64
    archsim run dgx_h100 --model llama3-70b --phase train --tp 8 --pp 2 --microbatches 8 ...

DESIGN is a cluster (``configs/cluster/*.yaml`` or its name; it is grown or shrunk to whole
nodes to hold ``--devices``) or a device design (then one node of ``--devices`` devices joined
by the device's own link). Plans are costed by :func:`archsim.parallel.evaluate_plan` and
proposed by :func:`mapper.plan.candidate_plans` (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from archsim.cli_common import positive_int, ratio_at_least_one
from archsim.workloads.errors import ArchsimError, ConfigError, Problem

__all__ = ["main", "add_run_args", "wants_plan", "run_plan", "load_cluster_for"]


def add_run_args(r: argparse.ArgumentParser) -> None:
    """The parallel-plan flags of ``archsim run`` (``--tp`` is already there)."""
    g = r.add_argument_group("parallel plan (docs/cluster.md; DESIGN may be a cluster)")
    g.add_argument("--pp", type=positive_int, default=1, help="pipeline stages (1F1B)")
    g.add_argument("--dp", type=positive_int, default=1, help="data-parallel replicas")
    g.add_argument("--ep", type=positive_int, default=1, help="expert-parallel degree (MoE)")
    g.add_argument("--cp", type=positive_int, default=1, help="context-parallel degree (ring attention)")
    g.add_argument("--microbatches", type=positive_int, default=1, help="microbatches per step")
    g.add_argument("--interleave", type=positive_int, default=1,
                   help="model chunks per pipeline stage (interleaved 1F1B)")
    g.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage")
    g.add_argument("--recompute", choices=("none", "selective", "full"), default="none",
                   help="activation recomputation (training)")
    g.add_argument("--sequence-parallel", action="store_true",
                   help="Megatron sequence parallelism over the tp group")
    g.add_argument("--tp-overlap", action="store_true",
                   help="overlap tp collectives with the other half of the batch (TokenWeave)")
    g.add_argument("--moe-imbalance", type=ratio_at_least_one, default=1.0,
                   help="busiest expert device's tokens / the mean (default 1)")


def wants_plan(args: argparse.Namespace) -> bool:
    """Does an ``archsim run`` command ask for a parallel plan (or name a cluster)?"""
    from archsim.arch.cluster import find_cluster

    if getattr(args, "pp", None) is None:
        return False
    return (find_cluster(args.config) is not None or args.pp > 1 or args.dp > 1
            or args.ep > 1 or args.cp > 1 or args.microbatches > 1 or args.zero > 0
            or args.recompute != "none" or args.sequence_parallel or args.tp_overlap
            or args.interleave > 1 or args.moe_imbalance != 1.0)


def load_cluster_for(design: str, devices: int, overrides: Sequence[str] = ()) -> Any:
    """A cluster of at least ``devices`` devices from a cluster or a device design."""
    import archsim
    from archsim.arch.cluster import find_cluster, load_cluster, single_node

    path = find_cluster(design)
    if path is not None:
        if overrides:
            raise ConfigError(Problem("--set applies to device designs, not clusters; edit "
                                      "the cluster YAML", "--set"))
        c = load_cluster(path)
        dpn = c.spec.devices_per_node
        nodes = -(-devices // dpn)
        if nodes > 1 and c.spec.scale_out is None:
            raise ConfigError(Problem(f"{devices} devices need {nodes} nodes but the cluster "
                                      f"{c.name!r} has no scale_out link", "scale_out",
                                      str(path)))
        return c.with_nodes(max(nodes, 1)) if nodes != c.spec.nodes else c
    return single_node(archsim.load(design, overrides), devices)


def _plan_from(args: argparse.Namespace) -> Any:
    from archsim.workloads.parallel import ParallelPlan

    return ParallelPlan(tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep, cp=args.cp,
                        microbatches=args.microbatches, zero=args.zero,
                        recompute=args.recompute, sequence_parallel=args.sequence_parallel,
                        interleave=args.interleave)


def run_plan(args: argparse.Namespace) -> int:
    """``archsim run`` with a plan: one plan on a cluster; prints the Result-shaped report."""
    from archsim.parallel import PlanOptions, evaluate_plan, to_result

    plan = _plan_from(args)
    cluster = load_cluster_for(args.config, plan.devices, args.overrides)
    phase = args.phase or "prefill"
    opts = PlanOptions(tp_overlap=args.tp_overlap, moe_imbalance=args.moe_imbalance)
    r = evaluate_plan(cluster, args.model, plan, phase, batch=args.batch, seq=args.seq,
                      context=args.context, options=opts)
    if not r.fits:
        print(f"warning: plan {plan.label()} needs {r.memory_bytes['total'] / 1e9:.4g} GB per "
              f"device but {cluster.spec.device} has {r.capacity_bytes / 1e9:.4g} GB",
              file=sys.stderr)
    if args.json:
        print(to_result(r, cluster).to_json())
    else:
        print(_report(r, cluster))
    return 0


def _report(r: Any, cluster: Any) -> str:
    mem = r.memory_bytes
    lines = [f"cluster  {cluster.name} ({cluster.spec.device}, {cluster.spec.devices_per_node} "
             f"per node)",
             f"workload {r.model} ({r.phase}), plan {r.plan.label()} on {r.plan.devices} devices",
             f"step     {_t(r.step_s)}   {r.tokens_per_s:,.1f} tokens/s   "
             f"{r.flops_per_device_s / 1e12:.4g} TFLOP/s per device",
             f"energy   {r.energy_j:.4g} J per step ({r.energy_j / r.step_s:.4g} W)",
             f"memory   {mem['total'] / 1e9:.4g} GB per device of {r.capacity_bytes / 1e9:.4g} GB "
             f"({'fits' if r.fits else 'DOES NOT FIT'}): " + ", ".join(
                 f"{k} {v / 1e9:.3g}" for k, v in mem.items() if k != "total" and v),
             "", "step breakdown"]
    for k, v in r.breakdown_s.items():
        if v:
            lines.append(f"  {k:<12} {_t(v):>10} {v / r.step_s:>6.1%}")
    return "\n".join(lines)


def _t(s: float) -> str:
    return f"{s * 1e3:.4g} ms" if s < 1 else f"{s:.4g} s"


def main(argv: Sequence[str]) -> int:
    """``archsim plan DESIGN --model M --devices N [...]``; returns the exit code."""
    ap = argparse.ArgumentParser(prog="archsim plan", description="Search parallel plans "
                                 "(tp, pp, dp, ep, cp, microbatches, recompute, ZeRO) of a model "
                                 "on a cluster; print the best and a table of the top plans.")
    ap.add_argument("design", help="cluster (configs/cluster, e.g. dgx_h100, h100_pod64) or a "
                    "device design (one node of --devices)")
    ap.add_argument("--model", required=True, help="zoo transformer or HF config.json")
    ap.add_argument("--devices", type=positive_int, required=True, help="devices the plan uses")
    ap.add_argument("--phase", choices=("train", "prefill", "decode"), default="train")
    ap.add_argument("--batch", type=positive_int, help="global batch in sequences (default: devices "
                    "for train, 16 otherwise)")
    ap.add_argument("--seq", type=positive_int, help="tokens per sequence (prefill/train)")
    ap.add_argument("--context", type=positive_int, help="KV-cache tokens (decode)")
    ap.add_argument("--top", type=positive_int, default=10, help="rows of the table (default 10)")
    ap.add_argument("--objective", choices=("time", "energy"), default="time",
                    help="rank by step time (default) or energy per step")
    ap.add_argument("--tp-overlap", action="store_true", help="TokenWeave-style tp overlap")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    try:
        args = ap.parse_args(list(argv))
    except SystemExit as e:
        return int(e.code or 0)
    try:
        return _search(args)
    except ArchsimError as exc:
        print(exc.render(), file=sys.stderr)
        return 2


def _search(args: argparse.Namespace) -> int:
    from archsim.mapper.plan import candidate_plans, search
    from archsim.parallel import PlanOptions, evaluate_plan, shape_of

    t0 = time.perf_counter()
    s = shape_of(args.model)
    if args.phase not in s.phases:
        raise ConfigError(Problem(f"model {s.name!r} has no phase {args.phase!r}", "--phase"))
    cluster = load_cluster_for(args.design, args.devices)
    batch = args.batch or (args.devices if args.phase == "train" else 16)
    seq = 1 if args.phase == "decode" else (args.seq or s.default_seq)
    plans = candidate_plans(s, args.devices, args.phase, batch, seq,
                            cluster.spec.devices_per_node)
    if not plans:
        raise ConfigError(Problem(f"no valid plan of {args.devices} devices for {s.name} with "
                                  f"batch {batch} (the batch must split over data parallelism)",
                                  "--devices"))
    memo: dict = {}
    opts = PlanOptions(tp_overlap=args.tp_overlap)
    res = search(plans, lambda p: evaluate_plan(cluster, s, p, args.phase, batch, seq,
                                                args.context, opts, memo),
                 key=(lambda r: r.step_s) if args.objective == "time" else (lambda r: r.energy_j))
    dt = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"model": s.name, "phase": args.phase, "cluster": cluster.name,
                          "devices": args.devices, "batch": batch, "seq": seq,
                          "tried": res.tried, "feasible": len(res.ranked), "search_s": dt,
                          "plans": [r.row() for r in res.ranked[:args.top]]}, indent=2))
        return 0 if res.ranked else 1
    print(f"{s.name} {args.phase}, batch {batch} x {seq} tokens, on {args.devices} devices of "
          f"{cluster.name}: {res.tried} plans tried, {len(res.ranked)} fit in memory "
          f"({dt:.2f} s)")
    if not res.ranked:
        best_inf = min(res.infeasible, key=lambda r: r.memory_bytes["total"])
        print(f"no plan fits; the smallest needs {best_inf.memory_bytes['total'] / 1e9:.4g} GB "
              f"per device ({best_inf.plan.label()}) of {best_inf.capacity_bytes / 1e9:.4g} GB")
        return 1
    best = res.ranked[0]
    print("\nbest plan\n" + _report(best, cluster) + "\n")
    hdr = (f"{'#':>3} {'plan':<40} {'step':>10} {'tokens/s':>12} {'mem GB':>8} "
           f"{'energy J':>10} {'bubble':>7} {'comm':>6}")
    print(hdr)
    print("-" * len(hdr))
    for i, r in enumerate(res.ranked[:args.top], 1):
        b = r.breakdown_s
        comm = sum(b[k] for k in ("tp_comm", "ep_comm", "cp_comm", "pp_comm", "dp_comm"))
        print(f"{i:>3} {r.plan.label()[:40]:<40} {_t(r.step_s):>10} {r.tokens_per_s:>12,.0f} "
              f"{r.memory_bytes['total'] / 1e9:>8.3g} {r.energy_j:>10.4g} "
              f"{b['bubble'] / r.step_s:>7.1%} {comm / r.step_s:>6.1%}")
    return 0
