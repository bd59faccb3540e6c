"""Sweep throughput: a 1,000-point analytical sweep of configs/spatial/tpu_like.yaml over
ResNet-50 (int8) on the local process-pool backend (default 2 workers).

    python3 benchmarks/bench_sweep.py [--workers 2] [--backend local|dask] [--no-json]

Prints points per wall second (issue 30's target: >= 100/s on 2 workers) and the CPU
seconds of the driver and its workers (user + system, ``getrusage``), with points per
CPU-second: on a loaded machine the wall rate follows the load, the CPU rate does not
(2 workers on 2 otherwise idle cores reach about twice it). Runs into a fresh temporary
database.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SPEC = """
base: {base}
axes:
  - {{key: "units[0].rows", values: [16, 32, 64, 128, 256]}}
  - {{key: "units[0].cols", values: [16, 32, 64, 128, 256]}}
  - {{key: "units[0].global_buffer_kib", log_range: [1024, 16384, 5]}}
  - {{key: "units[0].memory.bandwidth_gbps", values: [100, 150, 225, 300, 450, 600, 900, 1200]}}
workloads:
  - {{model: resnet50, a_format: int8, w_format: int8}}
objectives: [latency_s, energy_j]
constraints:
  area_mm2: {{max: 100}}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backend", default="local", choices=("local", "dask"))
    ap.add_argument("--no-json", action="store_true", help="store metrics only")
    ap.add_argument("--db", help="keep the database here (default: a temporary file)")
    args = ap.parse_args()
    from archsim.explore import parse_spec_text, run_sweep, sweep_front
    from archsim.explore.pareto import front_table

    spec = parse_spec_text(SPEC.format(base=ROOT / "configs/spatial/tpu_like.yaml"))
    assert spec.space_size == 1000, spec.space_size
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "bench.sqlite")
        r0 = _cpu()
        t0 = time.perf_counter()
        rep = run_sweep(spec, db, backend=args.backend, workers=args.workers,
                        progress=True, with_json=not args.no_json)
        wall = time.perf_counter() - t0
        driver, workers = (a - b for a, b in zip(_cpu(), r0))
        print(f"{rep.evaluated} points ({rep.errors} errors) on {args.workers} "
              f"{args.backend} workers in {wall:.2f} s: {rep.evaluated / wall:.1f} points/s"
              f"{' (metrics only)' if args.no_json else ' (with full JSON results)'}")
        print(f"CPU {driver + workers:.2f} s (driver {driver:.2f}, workers {workers:.2f}): "
              f"{rep.evaluated / (driver + workers):.1f} points per CPU-second")
        print(front_table(sweep_front(db, spec.objectives, spec.constraints)[:5],
                          spec.objectives))
    return 0


def _cpu() -> tuple[float, float]:
    """(this process's, its reaped children's) user + system CPU seconds."""
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                 resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    sys.exit(main())
