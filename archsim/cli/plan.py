"""``archsim plan`` (search parallel plans) and the parallel-plan flags of ``archsim run``.

    archsim plan h100_pod64 --model llama3-70b --devices 64 --phase train --batch 256 --seq 4096
    archsim plan dgx_h100 --model deepseek-v3 --devices 16 --phase decode --batch 64
    archsim run dgx_h100 --model llama3-70b --phase train --tp 8 --pp 2 --microbatches 8 ...
    archsim plan dgx_h100 --model llama3-70b --devices 8 --phase decode --objective energy \
        --power-caps 100%,85%,70% --fewer-devices

DESIGN is a cluster (``configs/cluster/*.yaml`` or its name) or a device design (then one
node of ``--devices`` devices joined by the device's own link): :mod:`archsim.plans`.
"""

from __future__ import annotations

import argparse
import sys

from archsim.api import device_build
from archsim.arch.collective import IMPLS
from archsim.cli.common import (
    add_attention_kernel_flag,
    add_kv_flags,
    add_weight_group_flags,
    add_weight_sparsity_flag,
    kv_of,
    non_empty,
    non_negative_int,
    positive_float,
    positive_int,
    ratio_at_least_one,
)
from archsim.mapper.overlap import OVERLAP_HELP, parse_overlap
from archsim.offload import OFFLOAD_KINDS, OFFLOAD_TIERS, Offload
from archsim.parallel import PlanOptions, evaluate_plan, power_capped, to_result
from archsim.plans import OBJECTIVES, load_cluster_for, plan_report, search_plans
from archsim.varlen import CP_SHARDINGS, PACKINGS, Varlen, parse_doc_lengths
from archsim.workloads.errors import ConfigError, Problem, WorkloadError
from archsim.workloads.parallel import ParallelPlan, default_microbatches

HELP = "search parallel plans of a model on a cluster; see 'archsim plan --help'"
TP_ALLREDUCE_HELP = ("tensor-parallel all-reduce inside a node: nccl (default), vLLM's custom "
                     "all-reduce replayed in a CUDA graph (custom-graph) or eager (custom-eager),"
                     " or auto (the custom kernel where it is faster, as serving engines do); "
                     "the custom kernel needs a custom_allreduce spec (docs/cluster.md)")
DESCRIPTION = ("Search parallel plans (tp, pp, dp, ep, cp, microbatches, recompute, ZeRO) of a "
               "model on a cluster; print the best and a table of the top plans.")


def power_caps(text: str) -> tuple[float, ...]:
    """argparse type: comma-separated power caps, fractions of the board's limit in (0, 1]
    or percentages (``1,0.85,0.7`` or ``100%,85%,70%``)."""
    out = []
    for part in text.split(","):
        t = part.strip()
        try:
            v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected fractions in (0, 1] or percentages, "
                                             f"comma-separated, got {part!r}") from None
        if not 0 < v <= 1:
            raise argparse.ArgumentTypeError(f"expected a power cap in (0, 1] (or 1-100%), got "
                                             f"{part!r}")
        out.append(v)
    return tuple(out)


def add_plan_flags(r: argparse.ArgumentParser) -> None:
    """The parallel-plan flags of ``archsim run`` (``--tp`` is already there)."""
    g = r.add_argument_group("parallel plan (docs/cluster.md; DESIGN may be a cluster)")
    g.add_argument("--pp", type=positive_int, default=1, help="pipeline stages (1F1B)")
    g.add_argument("--dp", type=positive_int, default=1, help="data-parallel replicas")
    g.add_argument("--ep", type=positive_int, default=1, help="expert-parallel degree (MoE)")
    g.add_argument("--cp", type=positive_int, default=1, help="context-parallel degree (ring attention)")
    g.add_argument("--microbatches", type=positive_int, default=None,
                   help="microbatches per step (default: with --pp > 1, micro-batches of one "
                        "sequence, batch / dp of them; else 1)")
    g.add_argument("--kv-format", type=non_empty,
                   help="KV-cache number format of a plan (default: the activation format)")
    g.add_argument("--interleave", type=positive_int, default=1,
                   help="model chunks per pipeline stage (interleaved 1F1B)")
    g.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage")
    g.add_argument("--recompute", choices=("none", "selective", "full"), default="none",
                   help="activation recomputation (training)")
    g.add_argument("--sequence-parallel", action="store_true",
                   help="Megatron sequence parallelism over the tp group")
    g.add_argument("--tp-overlap", action="store_true",
                   help="overlap tp collectives with the other half of the batch (TokenWeave)")
    g.add_argument("--overlap", default=None, metavar="TECHNIQUE",
                   help=OVERLAP_HELP + "; on a device design (no other plan flag) the "
                   "one device's graph is scheduled (archsim.evaluate's overlap=); on a "
                   "cluster, or with another plan flag, the plan's")
    g.add_argument("--moe-imbalance", type=ratio_at_least_one, default=1.0,
                   help="busiest expert device's tokens / the mean (default 1)")
    g.add_argument("--tp-allreduce", choices=IMPLS, default="nccl", help=TP_ALLREDUCE_HELP)
    add_offload_flags(g)
    g.add_argument("--power-cap", type=power_cap, default=1.0,
                   help="every device's power limit, a fraction of the board's or a percentage "
                        "(e.g. 70%%; a design with a DVFS model: H100, H200)")
    add_varlen_flags(g)


def add_varlen_flags(g: argparse._ActionsContainer) -> None:
    """The variable-length document flags (training; :mod:`archsim.varlen`)."""
    g.add_argument("--doc-lengths", metavar="DIST|FILE",
                   help="train on documents of these lengths packed into the sequences, with "
                        "document masks: N, uniform:A:B, lognormal:MEDIAN:SIGMA (tokens; the "
                        "serving forms) or a file of lengths (docs/cluster.md)")
    g.add_argument("--packing", choices=PACKINGS, default=None,
                   help="fixed: first-fit in arrival order (default); balanced: longest first "
                        "into the sequence of least attention work (WLB-LLM)")
    g.add_argument("--cp-sharding", choices=CP_SHARDINGS, default=None,
                   help="a sequence's tokens over the cp ranks: zigzag (default, Megatron-Core), "
                        "contiguous, or per-document (each document zig-zagged: WLB-LLM)")
    g.add_argument("--doc-seed", type=non_negative_int, default=0,
                   help="seed of the document draws from a distribution (default 0)")


def varlen_from_args(args: argparse.Namespace) -> Varlen | None:
    """The :class:`Varlen` of ``--doc-lengths`` (None without it; ``--packing`` or
    ``--cp-sharding`` without it is refused)."""
    if args.doc_lengths is None:
        for flag, val in (("--packing", args.packing), ("--cp-sharding", args.cp_sharding),
                          ("--doc-seed", args.doc_seed or None)):
            if val is not None:
                raise ConfigError(Problem(f"{flag} applies to documents: give their lengths with "
                                          f"--doc-lengths", flag))
        return None
    return Varlen(parse_doc_lengths(args.doc_lengths), args.packing or "fixed",
                  args.cp_sharding or "zigzag", args.doc_seed)


def add_offload_flags(g: argparse._ActionsContainer) -> None:
    """``--offload``, ``--offload-tier``, ``--offload-gbps`` (training memory tiers)."""
    g.add_argument("--offload", type=offload_kinds, default=(),
                   help="training state kept off the device, comma-separated: optimizer "
                        "(ZeRO-Offload: state and update on the CPU), params (ZeRO-Infinity: "
                        "weights streamed per block), activations (saved activations out and "
                        "back); docs/cluster.md 'Memory tiers'")
    g.add_argument("--offload-tier", choices=OFFLOAD_TIERS, default="host",
                   help="where --offload puts it: host DRAM over the host link, or nvme "
                        "(default host)")
    g.add_argument("--offload-gbps", type=positive_float, default=None,
                   help="achieved tier bandwidth per device and direction in GB/s (default: "
                        "the cluster's host: section)")


def offload_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",")))
    bad = [k for k in kinds if k not in OFFLOAD_KINDS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown offload {bad[0]!r}; expected some of: "
                                         f"{', '.join(OFFLOAD_KINDS)}")
    return kinds


def offload_of(args: argparse.Namespace) -> Offload:
    """The :class:`Offload` of the parsed flags (flags that need --offload are refused)."""
    if not args.offload and (args.offload_tier != "host" or args.offload_gbps is not None):
        flag = "--offload-gbps" if args.offload_gbps is not None else "--offload-tier"
        raise WorkloadError(Problem("applies only with --offload", flag))
    return Offload(args.offload, args.offload_tier, args.offload_gbps)


def power_cap(text: str) -> float:
    """argparse type: one power cap (``0.7`` or ``70%``)."""
    caps = power_caps(text)
    if len(caps) != 1:
        raise argparse.ArgumentTypeError(f"expected one power cap, got {text!r}")
    return caps[0]


def plan_flags_given(args: argparse.Namespace, overlap: bool = True) -> bool:
    """Does an ``archsim run`` command set a parallel-plan flag? (``overlap``: does
    ``--overlap`` count as one: it does on a cluster; on a device design alone it is an
    option of the one-device evaluation, ``archsim.evaluate(..., overlap=)``.)"""
    return (args.pp > 1 or args.dp > 1 or args.ep > 1 or args.cp > 1
            or (args.microbatches or 1) > 1 or args.kv_format is not None
            or args.zero > 0 or args.recompute != "none" or args.sequence_parallel
            or args.tp_overlap or args.interleave > 1 or args.moe_imbalance != 1.0
            or args.tp_allreduce != "nccl" or args.power_cap != 1.0 or bool(args.offload)
            or args.offload_tier != "host" or args.offload_gbps is not None
            or args.doc_lengths is not None or args.packing is not None
            or args.cp_sharding is not None or args.doc_seed != 0
            or (overlap and args.overlap is not None))


def run_plan(args: argparse.Namespace) -> int:
    """``archsim run`` with a plan: one plan on a cluster (refused when it needs more devices
    than the cluster has); each device's graphs built as a single device builds them (the
    design's attention, --a-format/--w-format/--kv-format, --kernels); prints the
    Result-shaped report."""
    mbs = args.microbatches or default_microbatches(args.pp, args.dp, args.batch)
    plan = ParallelPlan(tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep, cp=args.cp,
                        microbatches=mbs, zero=args.zero,
                        recompute=args.recompute, sequence_parallel=args.sequence_parallel,
                        interleave=args.interleave)
    cluster = load_cluster_for(args.config, plan.devices, args.overrides, grow=False)
    phase = args.phase or "prefill"
    varlen = varlen_from_args(args)
    if varlen is not None and args.cp_sharding is not None and args.cp == 1:
        raise ConfigError(Problem("shards documents over context-parallel ranks: it needs "
                                  "--cp > 1", "--cp-sharding"))
    opts = PlanOptions(tp_overlap=args.tp_overlap, moe_imbalance=args.moe_imbalance,
                       tp_allreduce=args.tp_allreduce, power_cap=args.power_cap,
                       offload=offload_of(args), varlen=varlen,
                       overlap=parse_overlap(args.overlap or "none"))
    power_capped(cluster, args.power_cap, "--power-cap")     # refused here, naming the flag
    build = device_build(cluster.device, args.a_format, args.w_format, args.kernels,
                         args.kv_format, args.attention_kernel or "sdpa",
                         weight_sparsity=args.weight_sparsity,
                         w_group_size=args.w_group_size, act_order=args.act_order,
                         kv=kv_of(args), kv_block_size=args.block_size)
    r = evaluate_plan(cluster, args.model, plan, phase, batch=args.batch, seq=args.seq,
                      context=args.context, options=opts, build=build)
    if not r.fits:
        print(f"warning: plan {plan.label()} needs {r.memory_bytes['total'] / 1e9:.4g} GB per "
              f"device but {cluster.spec.device} has {r.capacity_bytes / 1e9:.4g} GB",
              file=sys.stderr)
    if args.json:
        print(to_result(r, cluster).to_json())
    else:
        print(plan_report(r, cluster))
    return 0


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The flags of ``archsim plan``."""
    ap.add_argument("design", help="cluster (configs/cluster, e.g. dgx_h100, h100_pod64) or a "
                    "device design (one node of --devices)")
    ap.add_argument("--model", required=True,
                    help="zoo transformer, a Hugging Face config.json or a folder holding one")
    # checked by search_plans (a ConfigError naming --devices: exit 2 from main, no SystemExit)
    ap.add_argument("--devices", type=int, required=True, help="devices the plan uses")
    ap.add_argument("--phase", choices=("train", "prefill", "decode"), default="train")
    ap.add_argument("--batch", type=positive_int, help="global batch in sequences (default: devices "
                    "for train, 16 otherwise)")
    ap.add_argument("--seq", type=positive_int, help="tokens per sequence (prefill/train)")
    ap.add_argument("--context", type=positive_int, help="KV-cache tokens (decode)")
    ap.add_argument("--top", type=positive_int, default=10, help="rows of the table (default 10)")
    ap.add_argument("--objective", choices=OBJECTIVES, default="time",
                    help="rank by step time (default), energy per step (all devices, busy and "
                         "waiting, and links), cost per step (devices x step x "
                         "--price-per-gpu-hour) or goodput (tokens/s per device of the plans "
                         "whose step meets --slo-ms; prefill, decode)")
    ap.add_argument("--power-caps", type=power_caps, default=(1.0,),
                    help="device power limits to search, fractions of the board's or "
                         "percentages (e.g. 100%%,85%%,70%%; a design with a DVFS model: H100, "
                         "H200)")
    ap.add_argument("--fewer-devices", action="store_true",
                    help="also search every divisor of --devices as the device count (same "
                         "batch; unused devices cost nothing)")
    ap.add_argument("--price-per-gpu-hour", type=positive_float,
                    help="price of one device-hour (the cost objective; adds a $ / step column)")
    ap.add_argument("--slo-ms", type=positive_float,
                    help="step-time SLO of the goodput objective in ms (decode: time per output "
                         "token; prefill: the batch's time to first token)")
    ap.add_argument("--tp-overlap", action="store_true", help="TokenWeave-style tp overlap")
    add_offload_flags(ap)
    ap.add_argument("--overlap", default="none", metavar="TECHNIQUE",
                    help=OVERLAP_HELP + "; plans it cannot apply to are left out")
    ap.add_argument("--a-format", type=non_empty, help="activation number format (e.g. fp8_e4m3)")
    ap.add_argument("--w-format", type=non_empty, help="weight number format (e.g. fp8_e4m3, int4)")
    ap.add_argument("--kv-format", type=non_empty,
                    help="KV-cache number format (default: the activation format)")
    ap.add_argument("--tp-allreduce", choices=IMPLS, default="nccl", help=TP_ALLREDUCE_HELP)
    add_attention_kernel_flag(ap, "sdpa")
    add_varlen_flags(ap)
    add_weight_sparsity_flag(ap)
    add_weight_group_flags(ap)
    add_kv_flags(ap.add_argument_group("KV-cache techniques (prefill / decode; docs/serving.md)"),
                 block_size=True)
    ap.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """``archsim plan DESIGN --model M --devices N [...]``; exit 1 when no plan fits."""
    found = search_plans(args.design, args.model, args.devices, phase=args.phase,
                         batch=args.batch, seq=args.seq, context=args.context,
                         objective=args.objective, tp_overlap=args.tp_overlap,
                         overlap=args.overlap,
                         a_format=args.a_format, w_format=args.w_format,
                         kv_format=args.kv_format, tp_allreduce=args.tp_allreduce,
                         power_caps=args.power_caps, fewer_devices=args.fewer_devices,
                         price_per_gpu_hour=args.price_per_gpu_hour, slo_ms=args.slo_ms,
                         attention_kernel=args.attention_kernel or "sdpa",
                         offload=offload_of(args), varlen=varlen_from_args(args),
                         weight_sparsity=args.weight_sparsity,
                         w_group_size=args.w_group_size, act_order=args.act_order,
                         kv=kv_of(args), kv_block_size=args.block_size)
    if args.json:
        print(found.to_json(args.top))
        return 0 if found.ranked else 1
    print(found.summary())
    if found.best is None:
        print(found.no_fit_text())
        return 1
    print("\nbest plan\n" + plan_report(found.best, found.cluster) + "\n")
    if found.tradeoff():
        print(found.tradeoff() + "\n")
    print(found.table(args.top))
    return 0
