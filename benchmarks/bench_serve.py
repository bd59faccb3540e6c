"""Serving-simulator speed: 10,000 requests of LLaMA-3 70B on 8x H100 (one TP8 replica).

    python3 benchmarks/bench_serve.py [--requests 10000] [--rate 8] [--scheduler sarathi]

Requests: Poisson arrivals, ShareGPT-like lengths (lognormal prompt mean 161, output mean
338 tokens; archsim/serve/data/README.md), seed 0. Reports wall time on one core with a
cold cost memo (every evaluate() call included) and with a warm one, simulated iterations
and events per second; the warm run's CPU seconds too (the wall follows the machine's
load, the CPU seconds do not). Targets: issue 30, <= 2 s warm; issue 19, under 10 s wall
(LLMServingSim 2.0 needs ~86 s for 300 requests, as quoted in issue 19).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import archsim  # noqa: E402
from archsim.serve import (  # noqa: E402
    LengthDist,
    PoolSpec,
    SchedulerSpec,
    ServeSetup,
    parse_slo,
    serve,
    synthesize,
)
from archsim.serve.cost import IterationCost  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=8.0)
    ap.add_argument("--scheduler", default="sarathi")
    ap.add_argument("--model", default="llama3-70b")
    a = ap.parse_args()
    acc = archsim.load("gpu/h100")
    reqs = synthesize(a.rate, a.requests / a.rate * 2, LengthDist("lognormal", 161 / math.exp(0.5),
                      1.0, 4000), LengthDist("lognormal", 338 / math.exp(0.32), 0.8, 2000),
                      seed=0, max_requests=a.requests)
    setup = ServeSetup(a.model, PoolSpec(1, 8, SchedulerSpec(a.scheduler, chunk=512)))
    slo = parse_slo("ttft=2s,tpot=100ms")
    costs: dict[int, IterationCost] = {}
    t0 = time.perf_counter()
    raw: dict = {}
    res = serve(acc, setup, reqs, slo, costs=costs, raw_out=raw)
    cold = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    serve(acc, setup, reqs, slo, costs=costs)
    warm, warm_cpu = time.perf_counter() - t0, time.process_time() - c0
    iters = len(raw["timeline"])
    print(f"{len(reqs)} requests, {a.model} on 8x H100 (TP8), {a.scheduler}, {a.rate} req/s")
    print(f"  wall cold {cold:.2f} s ({res.evaluations} evaluate() calls), warm {warm:.2f} s "
          f"(warm CPU {warm_cpu:.2f} s)")
    print(f"  {iters} iterations simulated, {iters / warm:,.0f} iterations/s warm")
    print(f"  simulated span {res.span_s:.1f} s, {res.output_tokens_per_s:,.0f} output tok/s, "
          f"TTFT p50 {res.ttft_s['p50'] * 1e3:.1f} ms, TPOT p50 {res.tpot_s['p50'] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
