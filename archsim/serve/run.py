"""Run a serving simulation and summarise it; the capacity search.

    from archsim import load
    from archsim.serve import ServeSetup, PoolSpec, SchedulerSpec, synthesize, serve
    acc = load("gpu/h100")
    setup = ServeSetup("llama2-70b", PoolSpec(replicas=1, tp=8,
                       scheduler=SchedulerSpec("sarathi", chunk=512)))
    res = serve(acc, setup, synthesize(2.0, 60, LengthDist("fixed", 512),
                                       LengthDist("fixed", 128)))
    print(res.table())
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np

from archsim import energy
from archsim.api import VERSION
from archsim.arch.accelerator import Accelerator
from archsim.serve.cluster import ServeSetup, Simulation
from archsim.serve.cost import IterationCost
from archsim.serve.metrics import SLO, BenchmarkReport, ServeResult, percentiles
from archsim.serve.replica import policy_for
from archsim.serve.requests import Request

__all__ = ["serve", "find_capacity", "simulate", "benchmark_report"]


def simulate(acc: Accelerator, setup: ServeSetup, requests: list[Request],
             costs: dict[Any, IterationCost] | None = None,
             progress: Callable[[int, int], None] | None = None,
             concurrency: int | None = None) -> tuple[Simulation, dict[str, Any]]:
    """The simulation object and its raw records (``states``, ``tbt``, ``timeline`` ...);
    ``concurrency``: closed-loop load with that many clients (:meth:`Simulation.run`)."""
    sim = Simulation(acc, setup, costs)
    raw = sim.run(requests, progress, concurrency)
    return sim, raw


def serve(acc: Accelerator, setup: ServeSetup, requests: list[Request], slo: SLO | None = None,
          seed: int | None = None, costs: dict[Any, IterationCost] | None = None,
          progress: Callable[[int, int], None] | None = None,
          raw_out: dict[str, Any] | None = None, concurrency: int | None = None
          ) -> ServeResult:
    """Simulate ``requests`` and return the metrics (:class:`ServeResult`).

    ``costs`` may carry iteration-cost models between runs of the same design and model
    (the capacity search does); ``raw_out`` receives the raw records when given;
    ``concurrency``: closed-loop load (the requests are sent as clients free up, their
    ``arrival_s`` ignored).
    """
    sim, raw = simulate(acc, setup, requests, costs, progress, concurrency)
    if raw_out is not None:
        raw_out.update(raw)
        raw_out["sim"] = sim
    return summarise(sim, raw, setup, slo or SLO(), seed)


def summarise(sim: Simulation, raw: dict[str, Any], setup: ServeSetup, slo: SLO,
              seed: int | None) -> ServeResult:
    states = [s for s in raw["states"] if s.finish_t >= 0]
    n = len(raw["states"])
    arr = np.array([s.req.arrival_s for s in states]) if states else np.zeros(0)
    first = np.array([s.first_t for s in states]) if states else np.zeros(0)
    fin = np.array([s.finish_t for s in states]) if states else np.zeros(0)
    out = np.array([s.output for s in states], dtype=float) if states else np.zeros(0)
    prm = np.array([s.prompt for s in states], dtype=float) if states else np.zeros(0)
    ttft = first - arr
    e2e = fin - arr
    multi = out > 1
    tpot = (fin[multi] - first[multi]) / (out[multi] - 1)
    t0 = float(min((s.req.arrival_s for s in raw["states"]), default=0.0))
    span = max(raw["end_s"] - t0, 1e-12)
    gaps = np.asarray(raw["tbt"], dtype=float)     # every token gap (millions): once
    tbt = percentiles(gaps)
    ok = np.ones(len(states), dtype=bool)
    if slo.ttft_s is not None:
        ok &= ttft <= slo.ttft_s
    if slo.tpot_s is not None:
        tp_all = np.zeros(len(states))
        tp_all[multi] = tpot
        ok &= tp_all <= slo.tpot_s
    if slo.e2e_s is not None:
        ok &= e2e <= slo.e2e_s
    ttft_p = percentiles(ttft)
    dists = {"ttft": ttft, "tpot": tpot, "e2e": e2e, "tbt": gaps}
    run_ok = all(float(np.percentile(dists[m], q)) <= v if dists[m].size else True
                 for m, q, v in slo.percentiles)
    if slo.per_request():
        att = float(ok.sum()) / n if n else 0.0
    else:                       # run-level targets only: all or nothing
        att = 1.0 if run_ok else 0.0
        ok = np.full(len(states), run_ok)
    meets = att >= slo.attainment and run_ok
    all_arr = sorted(s.req.arrival_s for s in raw["states"])
    window = all_arr[-1] - all_arr[0] if all_arr else 0.0
    if window > 0 and len(all_arr) > 1:
        lam = (len(all_arr) - 1) / window
        h0, h1 = all_arr[0] + window / 2, all_arr[-1]
        done = int(((fin >= h0) & (fin <= h1)).sum())
        expect = lam * (h1 - h0)
        ratio = done / expect
        # Poisson noise allowance (3 sigma): short runs cannot fail on a handful of requests
        sustained = done >= 0.9 * expect - 3.0 * math.sqrt(expect)
    else:
        ratio, sustained = 1.0, True
    reps = sim.replicas
    # per pool (replicas share their pool's cost model): peaks, area (mm2)
    pools = {id(r.cost): (r.cost.peaks(), _area(r.cost))
             for r in {id(r.cost): r for r in reps}.values()}
    busy_energy = sum(r.energy_j for r in reps)
    idle = 0.0
    for r in reps:
        idle += sim._idle_power(r.cost.tp, r.cost.acc) * max(0.0, raw["end_s"] - t0 - r.busy_s)
    e_total = busy_energy + idle
    out_tokens = float(out.sum())
    kv_u = [r.kv_area / (span * r.kv.total) for r in reps if r.kv.total]
    kv_peak = max((r.kv.peak / r.kv.total for r in reps if r.kv.total), default=0.0)
    mfu_num = mbu_num = busy = 0.0
    for r in reps:
        fp, bp = pools[id(r.cost)][0]
        busy += r.busy_s
        mfu_num += r.flops / fp if fp else 0.0
        mbu_num += r.dram / bp if bp else 0.0
    devices = sum(r.cost.tp for r in reps)
    area = sum(pools[id(r.cost)][1] for r in reps)
    xn = sum(1 for s in states if s.decode_replica >= 0)
    dep = _deployment(setup, sim)
    return ServeResult(
        design=sim.acc.name, model=setup.model, deployment=dep, requests=n,
        finished=len(states), rejected=len(raw["rejected"]), clipped=raw["clipped"],
        span_s=span, ttft_s=ttft_p, tpot_s=percentiles(tpot), tbt_s=tbt,
        e2e_s=percentiles(e2e), requests_per_s=len(states) / span,
        output_tokens_per_s=out_tokens / span,
        total_tokens_per_s=(out_tokens + float(prm.sum())) / span,
        slo={k: v for k, v in asdict(slo).items()} if slo.any() else {},
        slo_attainment=att, goodput_rps=float(ok.sum()) / span if slo.any() else
        len(states) / span, meets_slo=bool(meets),
        kv_utilization=float(np.mean(kv_u)) if kv_u else 0.0,
        kv_peak_utilization=float(kv_peak),
        preemptions=sum(r.preemptions for r in reps),
        mfu=mfu_num / busy if busy else 0.0, mbu=mbu_num / busy if busy else 0.0,
        energy_j=e_total, energy_per_output_token_j=e_total / out_tokens if out_tokens else 0.0,
        energy_per_request_j=e_total / len(states) if states else 0.0,
        avg_power_w=e_total / span, area_mm2=area, devices=devices,
        mean_in_system=raw["area_sys"] / max(raw["end_s"], 1e-12),
        completion_ratio=float(ratio), sustained=bool(sustained),
        kv_transfer={"bytes": raw["xfer_bytes"], "requests": float(xn),
                     "mean_s": raw["xfer_s"] / xn if xn else 0.0},
        evaluations=sum(c.evaluations for c in {id(r.cost): r.cost for r in reps}.values()),
        archsim_version=VERSION, seed=seed, replicas=[r.info() for r in reps])


def benchmark_report(raw: dict[str, Any], concurrency: int | None = None) -> BenchmarkReport:
    """A serving-benchmark report (:class:`BenchmarkReport`) of a run's raw records: the
    finished requests' send, first-token and finish times and lengths, every token gap
    (ITL), over the span from the first send to the last event."""
    st = [s for s in raw["states"] if s.finish_t >= 0]
    t0 = float(min((s.req.arrival_s for s in raw["states"]), default=0.0))
    return BenchmarkReport.from_times(
        concurrency, raw["end_s"] - t0, [s.req.arrival_s for s in st],
        [s.first_t for s in st], [s.finish_t for s in st], [s.prompt for s in st],
        [s.output for s in st], raw["tbt"], len(raw["states"]) - len(st))


def _area(cost: IterationCost) -> float:
    """Area of one replica's ``tp`` devices (mm2), from ``energy.area`` of the design."""

    tech = energy.Technology(node_nm=cost.acc.technology.node_nm)
    comps = [c for u in cost.acc.units for c in u.components()]
    return energy.area(comps, tech).total_mm2 * cost.tp


def _deployment(setup: ServeSetup, sim: Simulation) -> dict[str, Any]:
    p = setup.pool
    sch = p.scheduler
    sched = policy_for(sch.policy).label(sch) + f", {sch.order}, preempt by {sch.preemption}"
    if sch.overhead_s or sch.overhead_per_seq_s:
        sched += (f", host {sch.overhead_s * 1e3:.3g} ms + {sch.overhead_per_seq_s * 1e3:.3g} "
                  "ms/sequence per iteration, "
                  + ("hidden behind the GPU step" if sch.overlap_host else "after the GPU step"))
    if setup.decode is None:
        summary = f"{p.replicas} replica(s) x {p.label()}, router {setup.router}"
    else:
        d = setup.decode
        summary = (f"disaggregated: {p.replicas} prefill x {p.label()} + {d.replicas} decode "
                   f"x {d.label()}, router {setup.router}")
    if setup.overlap.active:
        summary += f", overlap {setup.overlap.label()}"
    return {"summary": summary, "scheduler": sched, "replicas": p.replicas, "tp": p.tp,
            "pp": p.pp, "ep": p.ep,
            "decode_replicas": setup.decode.replicas if setup.decode else 0,
            "decode_tp": setup.decode.tp if setup.decode else 0,
            "decode_pp": setup.decode.pp if setup.decode else 0,
            "decode_ep": setup.decode.ep if setup.decode else 0,
            "decode_design": (setup.decode.design or sim.acc).name if setup.decode else "",
            "router": setup.router, "link": setup.link.name if setup.decode else "",
            "kv_blocks": [r.kv.total for r in sim.replicas],
            "block_size": sch.block_size, "memory_fraction": setup.memory_fraction}


def find_capacity(acc: Accelerator, setup: ServeSetup, slo: SLO,
                  make_requests: Callable[[float], list[Request]], lo: float = 0.0,
                  hi: float | None = None, steps: int = 8,
                  progress: Callable[[str], None] | None = None,
                  require_sustained: bool = True) -> tuple[float, ServeResult | None]:
    """The highest arrival rate (req/s) whose run meets ``slo`` (bisection), and — with
    ``require_sustained`` — is sustainable (``ServeResult.sustained``).

    ``make_requests(rate)`` builds the requests for a rate (same seed each time). The
    search doubles the rate from 0.25 req/s until a run misses the SLO, then bisects
    ``steps`` times. Returns (rate, result at that rate) — (0, None) when even the
    lowest rate misses.
    """
    costs: dict[Any, IterationCost] = {}

    def ok(rate: float) -> tuple[bool, ServeResult]:
        r = serve(acc, setup, make_requests(rate), slo, costs=costs)
        good = r.meets_slo and (r.sustained or not require_sustained)
        if progress is not None:
            progress(f"rate {rate:.4g} req/s: attainment {r.slo_attainment:.1%}, P99 TBT "
                     f"{r.tbt_s['p99'] * 1e3:.1f} ms, completion ratio "
                     f"{r.completion_ratio:.2f} -> {'ok' if good else 'miss'}")
        return good, r

    best: ServeResult | None = None
    if hi is None:
        rate = 0.25
        while True:
            good, res = ok(rate)
            if not good:
                hi = rate
                break
            lo, best = rate, res
            rate *= 2
            if rate > 1e5:
                return lo, best
    for _ in range(steps):
        mid = (lo + hi) / 2
        good, res = ok(mid)
        if good:
            lo, best = mid, res
        else:
            hi = mid
    return lo, best
