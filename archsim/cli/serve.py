"""``archsim serve``: request-level serving simulation of a model on a design
(:func:`archsim.serve.session.run_serving`).

    archsim serve DESIGN --model M [--tp N --pp P --ep E | --plan tp4pp2]
                  [--replicas R --router kv-aware]
                  [--decode-replicas R --decode-tp N (--decode-plan tp8) --kv-link nvlink4
                   --decode-design DESIGN2]
                  (--rate R --duration S [--prompt LEN --output LEN] | --trace FILE
                   | --concurrency N --isl LEN --osl LEN [--requests K])
                  [--scheduler vllm|orca|sarathi --chunk 512] [--slo ttft=2s,tpot=100ms]
                  [--json] [--timeline out.json] [--plot out.png] [--find-capacity]

Lengths: ``N``, ``uniform:A:B`` or ``lognormal:MEDIAN:SIGMA``. ``--trace`` takes a CSV or
JSONL file or a shipped trace name (``sharegpt_like``, ``azure_conv_like``,
``azure_code_like``); with ``--rate`` its arrivals are rescaled to that mean rate, with
``--duration`` cut to that window. Disaggregated serving (Splitwise/DistServe) is on when
``--decode-replicas`` is given: ``--replicas``/``--tp`` then describe the prefill pool.
``--concurrency N`` is closed-loop load as serving benchmarks run it (N clients, each sending
its next request when its previous one finishes); it prints the result block of vLLM's
``benchmark_serving`` (TTFT, TPOT, ITL, E2EL: mean, median, P90, P99; throughputs) above
the rest. Output files are written atomically (temporary file + rename). User mistakes print one
line and exit 2; no rate that meets the SLO (``--find-capacity``) exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys

from archsim.cli.common import (
    add_attention_kernel_flag,
    add_kv_flags,
    add_request_flags,
    add_runtime_flag,
    add_weight_group_flags,
    add_weight_sparsity_flag,
    non_empty,
    non_negative_int,
    positive_float,
    positive_int,
)
from archsim.mapper.overlap import OVERLAP_HELP
from archsim.serve.cluster import ROUTERS
from archsim.serve.engine import ENGINES
from archsim.serve.outputs import plot_serving, write_timeline
from archsim.serve.replica import KV_MANAGERS, ORDERS, POLICIES, PREEMPTIONS
from archsim.serve.session import run_serving
from archsim.workloads.ops import ALLREDUCE_IMPLS

HELP = ("simulate LLM serving (traces, batching, KV, SLOs, energy per token); see "
        "'archsim serve --help'")
DESCRIPTION = ("Simulate LLM serving (requests, batching, KV paging, replicas, "
               "disaggregation) on a design; every iteration is priced by the design's own "
               "model.")
#: Runs with fewer requests than this show no progress line.
PROGRESS_MIN_REQUESTS = 2000


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Design, deployment, requests, scheduler, metrics and outputs."""
    p.add_argument("design", help="config YAML or reference-design name (gpu/h100, pim_gpt)")
    p.add_argument("--model", required=True,
                   help="zoo decoder (llama2-70b, gpt2-xl, ...), a Hugging Face config.json or "
                        "a folder holding one")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE", help="override a config value (repeatable)")
    add_runtime_flag(p)
    add_attention_kernel_flag(p, "paged where the design has paged_attention constants "
                                 "(the GPUs above), else sdpa with a note")
    g = p.add_argument_group("deployment")
    g.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel devices per replica "
                   "(the prefill pool's when disaggregated)")
    g.add_argument("--pp", type=positive_int, default=1, help="pipeline stages per replica "
                   "(pp batches in flight, as vLLM/TensorRT-LLM)")
    g.add_argument("--ep", type=positive_int, default=1, help="expert-parallel degree of MoE "
                   "blocks (divides --tp)")
    g.add_argument("--cp", type=positive_int, default=1, help="context parallelism: not "
                   "modelled in a serving replica (only 1; the error says why)")
    g.add_argument("--plan", help="the replica's plan instead of --tp/--pp/--ep: a string "
                   "(tp4pp2, tp8ep8, 'tp4 pp2') or an 'archsim plan --json' output (its best "
                   "plan)")
    g.add_argument("--tp-allreduce", choices=ALLREDUCE_IMPLS, default="auto",
                   help="the replica's tensor-parallel all-reduce: auto (default: as serving "
                        "engines run it in CUDA graphs, their custom all-reduce where it is "
                        "faster than NCCL, NCCL above), nccl (NCCL's LL/LL128/Simple "
                        "protocols over the GPU's link), or vLLM's custom all-reduce in a CUDA "
                        "graph (custom-graph) or eager (custom-eager)")
    g.add_argument("--moe-routing", metavar="ROUTING", default=None,
                   help="mixture-of-experts models: price each MoE block's routed experts as "
                        "one fused call (vLLM's fused MoE kernel for the experts' format: "
                        "Triton bf16/fp8, gpt-oss's MXFP4 Triton kernel, Marlin for int4; "
                        "GPUs with fused_moe constants) with this routing: 'balanced' or "
                        "'power_law:ALPHA'; default: separate expert GEMMs")
    g.add_argument("--replicas", type=positive_int, default=1, help="data-parallel replicas")
    g.add_argument("--router", choices=ROUTERS, default="round-robin")
    g.add_argument("--decode-replicas", type=positive_int,
                   help="disaggregate: this many decode replicas")
    g.add_argument("--decode-tp", type=positive_int, help="TP of a decode replica (default --tp)")
    g.add_argument("--decode-pp", type=positive_int,
                   help="pipeline stages of a decode replica (default --pp)")
    g.add_argument("--decode-ep", type=positive_int,
                   help="expert-parallel degree of a decode replica (default --ep)")
    g.add_argument("--decode-plan", help="a decode replica's plan string (tp8, tp4pp2)")
    g.add_argument("--decode-design", help="the decode pool's design (default DESIGN): "
                   "prefill on DESIGN, decode on this one")
    g.add_argument("--kv-link", help="KV link: nvlink4, nvlink3, ib-ndr, ib-hdr or "
                   "GBPS[:LATENCY_US] (default nvlink4; ib-ndr with --decode-design)")
    g.add_argument("--a-format", type=non_empty, help="activation number format (e.g. fp8_e4m3)")
    g.add_argument("--w-format", type=non_empty, help="weight number format (e.g. fp8_e4m3, int4)")
    g.add_argument("--overlap", default="none", metavar="TECHNIQUE", help=OVERLAP_HELP)
    add_weight_sparsity_flag(g)
    add_weight_group_flags(g)
    g.add_argument("--kv-format", type=non_empty,
                   help="KV-cache number format (default: the activation format, else 16-bit)")
    g.add_argument("--memory-fraction", type=positive_float, default=0.9,
                   help="share of device memory for weights + KV (vLLM default 0.9)")
    add_kv_flags(p.add_argument_group("KV-cache techniques (docs/serving.md)"))
    r = p.add_argument_group("requests")
    add_request_flags(r)
    r.add_argument("--arrival", choices=("poisson", "gamma"), default="poisson")
    r.add_argument("--cv", type=positive_float, default=1.0, help="gamma arrivals: CV of the gaps")
    r.add_argument("--seed", type=non_negative_int, default=0)
    r.add_argument("--max-requests", type=positive_int)
    c = p.add_argument_group("closed-loop load (instead of --rate/--trace)")
    c.add_argument("--concurrency", type=positive_int, metavar="N",
                   help="N clients, each sending its next request when its previous one "
                   "finishes (vLLM benchmark_serving --max-concurrency)")
    c.add_argument("--isl", metavar="LEN", help="input length: N, uniform:A:B, "
                   "lognormal:MEDIAN:SIGMA")
    c.add_argument("--osl", metavar="LEN", help="output length (same forms)")
    c.add_argument("--requests", type=positive_int, metavar="K",
                   help="requests sent in all (default 10 per client)")
    s = p.add_argument_group("scheduler")
    s.add_argument("--scheduler", choices=POLICIES, default="vllm")
    s.add_argument("--chunk", type=positive_int, default=512, help="Sarathi token budget")
    s.add_argument("--max-num-seqs", type=positive_int, default=256)
    s.add_argument("--max-batched-tokens", type=positive_int,
                   help="vLLM/Orca tokens per iteration (default max(context, 2048))")
    s.add_argument("--order", choices=ORDERS, default="fcfs")
    s.add_argument("--preemption", choices=PREEMPTIONS, default="recompute")
    s.add_argument("--block-size", type=positive_int, default=16, help="KV block (tokens)")
    s.add_argument("--kv-manager", choices=KV_MANAGERS, default="hybrid",
                   help="hybrid (default): sliding-window layers keep only their window's KV "
                   "blocks, as serving engines do; uniform: every layer keeps every token's")
    s.add_argument("--iteration-overhead-ms", type=float, default=0.0,
                   help="engine time per iteration outside the ops (ms; default 0)")
    s.add_argument("--engine", choices=tuple(ENGINES),
                   help="a serving engine's host time per iteration, fitted on measured "
                   "H100 deployments (vllm: >= 0.14, hidden behind the GPU by async "
                   "scheduling; vllm-sync: earlier releases; trtllm; sglang), with the "
                   "GPUs' ideal runtime replaced by CUDA-graph replay (default: none, the "
                   "hardware alone; docs/serving.md 'Engine host time')")
    o = p.add_argument_group("metrics and output")
    o.add_argument("--slo", default="", help="per request: ttft=2s,tpot=100ms[,e2e=..]; "
                   "run percentiles: tbt_p99=100ms, ttft_p90=200ms, ...")
    o.add_argument("--attainment", type=positive_float, default=0.9,
                   help="SLO attainment target for meets/capacity (0-1]")
    o.add_argument("--find-capacity", action="store_true",
                   help="search the highest --rate that meets the SLO")
    o.add_argument("--fidelity", choices=("analytical", "cycle"), default="analytical")
    o.add_argument("--constraints", help="mapping constraints YAML (op -> unit rules for "
                   "multi-unit designs)")
    o.add_argument("--decode-constraints", help="constraints for decode attention instead "
                   "(AttAcc: examples/serving/attacc_like.constraints.yaml)")
    o.add_argument("--json", action="store_true", help="print the result as JSON")
    o.add_argument("--timeline", help="write a Chrome/Perfetto trace of the iterations")
    o.add_argument("--plot", help="write a PNG: latency CDFs and KV use over time")
    o.add_argument("--quiet", action="store_true", help="no progress on stderr")


def stderr_progress(done: int, total: int) -> None:
    """A one-line progress indicator on stderr (runs of :data:`PROGRESS_MIN_REQUESTS` or
    more requests)."""
    if total < PROGRESS_MIN_REQUESTS:
        return
    sys.stderr.write(f"\rserve: {done}/{total} requests finished")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    """Simulate; print the metrics (or JSON); write the timeline and plot."""
    quiet = args.quiet or args.json

    def note(msg: str) -> None:
        if not quiet:
            print(f"serve: {msg}", file=sys.stderr)
    sr = run_serving(
        args.design, args.model, overrides=args.overrides, tp=args.tp, replicas=args.replicas,
        router=args.router, decode_replicas=args.decode_replicas, decode_tp=args.decode_tp,
        kv_link=args.kv_link, memory_fraction=args.memory_fraction, rate=args.rate,
        duration=args.duration, trace=args.trace, prompt=args.prompt, output=args.output,
        arrival=args.arrival, cv=args.cv, seed=args.seed, max_requests=args.max_requests,
        scheduler=args.scheduler, chunk=args.chunk, max_num_seqs=args.max_num_seqs,
        max_batched_tokens=args.max_batched_tokens, order=args.order,
        preemption=args.preemption, block_size=args.block_size, kv_manager=args.kv_manager,
        iteration_overhead_ms=args.iteration_overhead_ms, engine=args.engine, slo=args.slo,
        attainment=args.attainment, find_capacity=args.find_capacity, fidelity=args.fidelity,
        constraints=args.constraints, decode_constraints=args.decode_constraints,
        a_format=args.a_format, w_format=args.w_format, kv_format=args.kv_format,
        progress=None if quiet else stderr_progress, note=note,
        concurrency=args.concurrency, isl=args.isl, osl=args.osl, requests=args.requests,
        pp=args.pp, ep=args.ep, cp=args.cp, plan=args.plan, decode_pp=args.decode_pp,
        decode_ep=args.decode_ep, decode_plan=args.decode_plan,
        decode_design=args.decode_design, prefix_hit_rate=args.prefix_hit_rate,
        kv_remat=args.kv_remat, topk_blocks=args.topk_blocks,
        kv_offload_gb=args.kv_offload_gb, attention_kernel=args.attention_kernel,
        tp_allreduce=args.tp_allreduce, overlap=args.overlap,
        weight_sparsity=args.weight_sparsity, w_group_size=args.w_group_size,
        act_order=args.act_order, moe_routing=args.moe_routing)
    res = sr.result
    if res is None:
        print("no tested rate meets the SLO (the lowest tried was 0.25 req/s)",
              file=sys.stderr)
        return 1
    if sr.capacity_rps is not None:
        rate = sr.capacity_rps
        if args.json:
            d = res.to_dict()
            d["capacity_rps"] = rate
            print(json.dumps(d, indent=2))
        else:
            print(f"capacity   {rate:.4g} req/s ({rate / res.devices:.4g} req/s per device) "
                  f"meets the SLO\n")
            print(res.table())
    elif sr.benchmark is not None:
        if args.json:
            d = res.to_dict()
            d["benchmark"] = sr.benchmark.to_dict()
            print(json.dumps(d, indent=2))
        else:
            print(sr.benchmark.table() + "\n")
            print(res.table(latencies=False))
    else:
        print(res.to_json() if args.json else res.table())
    if args.timeline:
        write_timeline(sr.raw, args.timeline)
    if args.plot:
        plot_serving(res, sr.raw, args.plot)
    return 0
