"""Benchmarks of the sim core: engine events/s and DRAM commands/s (one core).

Run: ``python benchmarks/bench_sim.py [--tasks 1000000] [--requests 200000]``.
Numbers are printed, never asserted (see STYLE.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sim import TaskGraphBuilder, dram_preset, run, simulate_requests  # noqa: E402


def random_graph(n: int, seed: int = 0, bulk: bool = True):
    """n tasks on 8 servers (capacity 1..4); each depends on up to 2 of the last 64."""
    rng = np.random.default_rng(seed)
    b = TaskGraphBuilder()
    res = [b.add_server(f"s{i}", int(c)) for i, c in enumerate(rng.integers(1, 5, 8))]
    r = rng.integers(0, 8, n)
    dur = rng.integers(1, 100, n)
    ndep = np.minimum(rng.integers(0, 3, n), np.arange(n))
    back = rng.integers(1, 65, (n, 2))
    dep_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(ndep, out=dep_ptr[1:])
    ids = np.arange(n)[:, None] - back
    mask = np.arange(2)[None, :] < ndep[:, None]
    dep_idx = np.maximum(ids, 0)[mask]
    if bulk:
        b.add_tasks(np.asarray(res)[r], dur, dep_ptr=dep_ptr, dep_idx=dep_idx)
    else:
        for t in range(n):
            b.add_task(res[r[t]], int(dur[t]), deps=dep_idx[dep_ptr[t]:dep_ptr[t + 1]].tolist())
    return b.build()


def bench_engine(n: int) -> None:
    run(random_graph(1000))  # compile / load cache
    t0 = time.perf_counter()
    tg = random_graph(n)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    tg_loop = random_graph(n, bulk=False)
    t_loop = time.perf_counter() - t0
    assert tg_loop.num_tasks == n
    for record in (False, True):
        t0 = time.perf_counter()
        stats = run(tg, record_task_times=record)
        dt = time.perf_counter() - t0
        print(f"engine: {n:,} tasks, record_task_times={record}: {dt:.3f} s, "
              f"{stats.events / dt / 1e6:.1f} M events/s, makespan {stats.makespan_cycles:,}")
    print(f"build: add_tasks (vectorised) {t_build:.2f} s, add_task loop {t_loop:.2f} s "
          f"(incl. validation)")


def bench_dram(n: int) -> None:
    for name in ("DDR4-2400", "HBM2e", "GDDR6"):
        spec = dram_preset(name)
        simulate_requests(spec, [0, 64], [False, False], [0, 0])  # compile / load cache
        rng = np.random.default_rng(0)
        for kind in ("sequential", "random"):
            if kind == "sequential":
                addr = np.arange(n, dtype=np.int64) * spec.burst_bytes
            else:
                addr = rng.integers(0, spec.capacity_bytes() // spec.burst_bytes, n)
                addr = addr * spec.burst_bytes
            t0 = time.perf_counter()
            res = simulate_requests(spec, addr, rng.random(n) < 0.3, np.zeros(n, np.int64),
                                    max_outstanding=16)
            dt = time.perf_counter() - t0
            ncmd = sum(res.stats.command_counts.values())
            print(f"dram {name:9s} {kind:10s}: {n:,} requests, {ncmd:,} commands, "
                  f"{dt:.3f} s, {ncmd / dt / 1e6:.2f} M commands/s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=200_000)
    a = ap.parse_args()
    bench_engine(a.tasks)
    bench_dram(a.requests)


if __name__ == "__main__":
    main()
