"""``archsim serve``: request-level serving simulation of a model on a design.

    archsim serve DESIGN --model M [--tp N --replicas R --router kv-aware]
                  [--decode-replicas R --decode-tp N --kv-link nvlink4]
                  (--rate R --duration S [--prompt LEN --output LEN] | --trace FILE)
                  [--scheduler vllm|orca|sarathi --chunk 512] [--slo ttft=2s,tpot=100ms]
                  [--json] [--timeline out.json] [--plot out.png] [--find-capacity]

Lengths: ``N``, ``uniform:A:B`` or ``lognormal:MEDIAN:SIGMA``. ``--trace`` takes a CSV or
JSONL file or a shipped trace name (``sharegpt_like``, ``azure_conv_like``,
``azure_code_like``); with ``--rate`` its arrivals are rescaled to that mean rate, with
``--duration`` cut to that window. Disaggregated serving (Splitwise/DistServe) is on when
``--decode-replicas`` is given: ``--replicas``/``--tp`` then describe the prefill pool.
Output files are written atomically (temporary file + rename). User mistakes print one
line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from archsim.cli_common import Parser, atomic_output, positive_float, positive_int
from archsim.workloads.errors import ArchsimError, Problem, WorkloadError

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    from archsim.serve.cluster import ROUTERS
    from archsim.serve.replica import ORDERS, POLICIES, PREEMPTIONS

    p = Parser(prog="archsim serve", description="Simulate LLM serving (requests, batching, "
                "KV paging, replicas, disaggregation) on a design; every iteration is priced "
                "by the design's own model.")
    p.add_argument("design", help="config YAML or reference-design name (gpu/h100, pim_gpt)")
    p.add_argument("--model", required=True, help="zoo decoder (llama2-70b, gpt2-xl, ...)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE", help="override a config value (repeatable)")
    g = p.add_argument_group("deployment")
    g.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel devices per replica "
                   "(the prefill pool's when disaggregated)")
    g.add_argument("--replicas", type=positive_int, default=1, help="data-parallel replicas")
    g.add_argument("--router", choices=ROUTERS, default="round-robin")
    g.add_argument("--decode-replicas", type=positive_int,
                   help="disaggregate: this many decode replicas")
    g.add_argument("--decode-tp", type=positive_int, help="TP of a decode replica (default --tp)")
    g.add_argument("--kv-link", default="nvlink4",
                   help="KV link: nvlink4, nvlink3, ib-ndr, ib-hdr or GBPS[:LATENCY_US]")
    g.add_argument("--memory-fraction", type=positive_float, default=0.9,
                   help="share of device memory for weights + KV (vLLM default 0.9)")
    r = p.add_argument_group("requests")
    r.add_argument("--rate", type=positive_float, help="mean arrival rate (requests/s)")
    r.add_argument("--duration", type=positive_float, help="arrival window (s)")
    r.add_argument("--trace", help="CSV/JSONL trace or a shipped trace name")
    r.add_argument("--prompt", default="512", help="prompt length: N, uniform:A:B, "
                   "lognormal:MEDIAN:SIGMA")
    r.add_argument("--output", default="128", help="output length (same forms)")
    r.add_argument("--arrival", choices=("poisson", "gamma"), default="poisson")
    r.add_argument("--cv", type=positive_float, default=1.0, help="gamma arrivals: CV of the gaps")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--max-requests", type=positive_int)
    s = p.add_argument_group("scheduler")
    s.add_argument("--scheduler", choices=POLICIES, default="vllm")
    s.add_argument("--chunk", type=positive_int, default=512, help="Sarathi token budget")
    s.add_argument("--max-num-seqs", type=positive_int, default=256)
    s.add_argument("--max-batched-tokens", type=positive_int,
                   help="vLLM/Orca tokens per iteration (default max(context, 2048))")
    s.add_argument("--order", choices=ORDERS, default="fcfs")
    s.add_argument("--preemption", choices=PREEMPTIONS, default="recompute")
    s.add_argument("--block-size", type=positive_int, default=16, help="KV block (tokens)")
    s.add_argument("--iteration-overhead-ms", type=float, default=0.0,
                   help="engine time per iteration outside the ops (ms; default 0)")
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
    return p


def _requests(args: argparse.Namespace) -> Callable[[float | None], list[Any]]:
    from archsim.serve.requests import Request, load_trace, parse_length, synthesize, trace_path

    if args.trace:
        base = load_trace(trace_path(args.trace))
        span = base[-1].arrival_s - base[0].arrival_s
        mean_rate = (len(base) - 1) / span if span > 0 else None

        def from_trace(rate: float | None) -> list[Request]:
            k = 1.0
            if rate is not None and mean_rate:
                k = mean_rate / rate
            out: list[Request] = []
            for q in base:
                t = (q.arrival_s - base[0].arrival_s) * k
                if args.duration is not None and t >= args.duration:
                    break
                out.append(replace(q, rid=len(out), arrival_s=t))
                if args.max_requests and len(out) >= args.max_requests:
                    break
            return out
        return from_trace
    if args.rate is None and not args.find_capacity:
        raise WorkloadError(Problem("give --rate (with --duration) or --trace", "--rate"))
    if args.duration is None:
        raise WorkloadError(Problem("give --duration S (the arrival window) with --rate",
                                    "--duration"))
    pl = parse_length(args.prompt, "--prompt")
    ol = parse_length(args.output, "--output")

    def synth(rate: float | None) -> list[Request]:
        return synthesize(rate or args.rate, args.duration, pl, ol, args.seed, args.arrival,
                          args.cv, args.max_requests)
    return synth


def _atomic(path: str, write: Callable[[str], None], flag: str) -> None:
    """Write through ``write(tmp)`` then rename onto ``path`` (no partial file;
    ``archsim.cli_common.atomic_output``)."""
    with atomic_output(path, flag) as tmp:
        write(str(tmp))


def _timeline(raw: dict[str, Any], path: str) -> None:
    """Chrome Trace Event JSON: one track per replica (iterations), KV-use counters."""
    ev: list[dict[str, Any]] = []
    for rep, t0, dt, pf, nd, kv, e in raw["timeline"]:
        ev.append({"name": f"{'P' if pf else ''}{'D' if nd else ''} {pf}+{nd}", "ph": "X",
                   "pid": 0, "tid": rep, "ts": t0 * 1e6, "dur": dt * 1e6,
                   "args": {"prefill_tokens": pf, "decodes": nd, "energy_j": e}})
        ev.append({"name": f"kv_blocks_r{rep}", "ph": "C", "pid": 0, "ts": t0 * 1e6,
                   "args": {"used": kv}})

    def w(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": ev, "displayTimeUnit": "ms"}, f)
    _atomic(path, w, "--timeline")


def _plot(res: Any, raw: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    st = [s for s in raw["states"] if s.finish_t >= 0]
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    for name, vals in (("TTFT", [s.first_t - s.req.arrival_s for s in st]),
                       ("E2E", [s.finish_t - s.req.arrival_s for s in st])):
        v = np.sort(np.asarray(vals))
        ax[0].plot(v, np.arange(1, len(v) + 1) / max(1, len(v)), label=name)
    ax[0].set_xscale("log")
    ax[0].set_xlabel("latency (s)")
    ax[0].set_ylabel("CDF")
    ax[0].legend()
    tb = np.sort(np.asarray(raw["tbt"]))
    ax[1].plot(tb * 1e3, np.arange(1, len(tb) + 1) / max(1, len(tb)))
    ax[1].set_xlabel("time between tokens (ms)")
    ax[1].set_title(f"P99 TBT {res.tbt_s['p99'] * 1e3:.1f} ms")
    tl = raw["timeline"]
    reps = sorted({x[0] for x in tl})
    tot = {r["replica"]: r["kv_blocks"] for r in res.replicas}
    for rep in reps[:8]:
        pts = [(x[1], x[5] / max(1, tot[rep])) for x in tl if x[0] == rep]
        ax[2].plot([p[0] for p in pts], [p[1] for p in pts], lw=0.8, label=f"replica {rep}")
    ax[2].set_xlabel("time (s)")
    ax[2].set_ylabel("KV blocks used (fraction)")
    ax[2].legend(fontsize=7)
    fig.suptitle(f"{res.model} on {res.design} ({res.deployment['summary']})")
    fig.tight_layout()

    def w(tmp: str) -> None:
        fig.savefig(tmp, dpi=110, format="png")
    _atomic(path, w, "--plot")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on bad input, with one message line)."""
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except ArchsimError as exc:
        print(exc.render(), file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    import archsim
    from archsim.serve.cluster import PoolSpec, ServeSetup, parse_link, stderr_progress
    from archsim.serve.metrics import parse_slo
    from archsim.serve.replica import SchedulerSpec
    from archsim.serve.run import find_capacity, serve

    if not 0 < args.memory_fraction <= 1:
        raise WorkloadError(Problem(f"expected a fraction in (0, 1], got "
                                    f"{args.memory_fraction}", "--memory-fraction"))
    slo = parse_slo(args.slo, args.attainment)
    if args.find_capacity and not slo.any():
        raise WorkloadError(Problem("--find-capacity needs an SLO (e.g. --slo "
                                    "ttft=2s,tpot=100ms)", "--slo"))
    make = _requests(args)
    acc = archsim.load(args.design, args.overrides)
    sch = SchedulerSpec(args.scheduler, args.chunk, args.max_num_seqs,
                        args.max_batched_tokens or 0, args.order, args.preemption,
                        args.block_size, overhead_s=args.iteration_overhead_ms * 1e-3)
    if not 0 <= args.iteration_overhead_ms < 1e4:
        raise WorkloadError(Problem(f"expected 0 <= ms < 10000, got "
                                    f"{args.iteration_overhead_ms}", "--iteration-overhead-ms"))
    decode = None
    if args.decode_replicas:
        decode = PoolSpec(args.decode_replicas, args.decode_tp or args.tp, sch)
    elif args.decode_tp:
        raise WorkloadError(Problem("--decode-tp needs --decode-replicas", "--decode-tp"))
    setup = ServeSetup(args.model, PoolSpec(args.replicas, args.tp, sch), decode, args.router,
                       parse_link(args.kv_link), args.memory_fraction, args.fidelity,
                       args.constraints, args.decode_constraints)
    raw: dict[str, Any] = {}
    quiet = args.quiet or args.json
    if args.find_capacity:
        def note(msg: str) -> None:
            if not quiet:
                print(f"serve: {msg}", file=sys.stderr)
        rate, res = find_capacity(acc, setup, slo, make, progress=note)
        if res is None:
            print("no tested rate meets the SLO (the lowest tried was 0.25 req/s)",
                  file=sys.stderr)
            return 1
        res = serve(acc, setup, make(rate), slo, seed=args.seed, raw_out=raw)
        if args.json:
            d = res.to_dict()
            d["capacity_rps"] = rate
            print(json.dumps(d, indent=2))
        else:
            print(f"capacity   {rate:.4g} req/s ({rate / res.devices:.4g} req/s per device) "
                  f"meets the SLO\n")
            print(res.table())
    else:
        reqs = make(args.rate)
        if not reqs:
            raise WorkloadError(Problem("no requests arrive in the window", "--duration"))
        prog = None if quiet or len(reqs) < 2000 else stderr_progress
        res = serve(acc, setup, reqs, slo, seed=args.seed, progress=prog, raw_out=raw)
        print(res.to_json() if args.json else res.table())
    if args.timeline:
        _timeline(raw, args.timeline)
    if args.plot:
        _plot(res, raw, args.plot)
    return 0
