"""Benchmarks of spatial-array cycle fidelity and CLI start-up (numbers printed, never asserted).

Run: ``python3 benchmarks/bench_cycle.py [--repeat 3] [--skip-startup]``.

1. ResNet-18 (batch 1, archsim's zoo) on a 32x32 weight-stationary array at cycle
   fidelity (``tpu_like`` with ``units[0].rows=32``, ``units[0].cols=32``): lowering +
   event simulation of every layer, in a fresh process with Numba's cache warm. Wall time
   and peak RSS (``ru_maxrss`` of the child) are shown beside SCALE-Sim's on the same
   layers and array (``tests/data/scalesim/runs.csv``, from ``benchmarks/scalesim_parity.py``).
2. Start-up: ``archsim gemm tpu_like --m 1024 --n 1024 --k 1024`` and ``archsim run
   tpu_like --model resnet18`` (analytical), wall time of a fresh process (best of N).
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import time, resource, json
t0 = time.perf_counter()
import archsim
acc = archsim.load("tpu_like", ["units[0].rows=32", "units[0].cols=32"])
wl = archsim.workload("resnet18")
t1 = time.perf_counter()
res = archsim.evaluate(acc, wl, fidelity="cycle")
t2 = time.perf_counter()
res2 = archsim.evaluate(acc, wl, fidelity="cycle")
t3 = time.perf_counter()
print(json.dumps({"import_load_s": t1 - t0, "first_eval_s": t2 - t1, "second_eval_s": t3 - t2,
                  "cycles": res.cycles, "same": res.cycles == res2.cycles,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _run(cmd: list[str]) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {p.stderr[-2000:]}")
    return time.perf_counter() - t


def resnet18_cycle() -> dict:
    import json

    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, capture_output=True,
                       text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(p.stderr[-3000:])
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = wall
    out["child_maxrss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


def scalesim_runs() -> list[dict[str, str]]:
    p = ROOT / "tests" / "data" / "scalesim" / "runs.csv"
    if not p.exists():
        return []
    with open(p) as f:
        return list(csv.DictReader(f))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-startup", action="store_true")
    args = ap.parse_args()
    print(f"host: {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    _run([sys.executable, "-m", "archsim", "gemm", "tpu_like", "--m", "64", "--n", "64",
          "--k", "64", "--fidelity", "cycle"])            # warm Numba's cache
    r = resnet18_cycle()
    print("ResNet-18 on a 32x32 WS array, cycle fidelity (fresh process, Numba cache warm):")
    print(f"  import + load      {r['import_load_s']:.2f} s")
    print(f"  evaluate (cycle)   {r['first_eval_s']:.2f} s first, {r['second_eval_s']:.2f} s "
          f"second; {r['cycles']} cycles; deterministic: {r['same']}")
    print(f"  process wall       {r['process_wall_s']:.2f} s, peak RSS {r['rss_mib']:.0f} MiB")
    for s in scalesim_runs():
        if s["topology"] == "resnet18":
            w, m = float(s["wall_s"]), float(s["peak_rss_mib"])
            tr = "with traces" if s.get("traces_written", "yes") == "yes" else "no traces"
            print(f"  SCALE-Sim {s['scalesim_version']} {s['dataflow']} ({tr}): {w:.1f} s, "
                  f"{m:.0f} MiB "
                  f"-> archsim {w / r['process_wall_s']:.0f}x faster (whole process), "
                  f"{m / r['rss_mib']:.1f}x less memory")
    if args.skip_startup:
        return 0
    print(f"start-up (fresh process, best of {args.repeat}):")
    cmds = {
        "archsim gemm tpu_like --m 1024 --n 1024 --k 1024":
            ["gemm", "tpu_like", "--m", "1024", "--n", "1024", "--k", "1024"],
        "archsim run tpu_like --model resnet18": ["run", "tpu_like", "--model", "resnet18"],
        "archsim run tpu_like --model gpt2-small --seq 128":
            ["run", "tpu_like", "--model", "gpt2-small", "--seq", "128"],
    }
    for label, argv in cmds.items():
        best = min(_run([sys.executable, "-m", "archsim", *argv]) for _ in range(args.repeat))
        print(f"  {label:<52} {best:.2f} s")
    base = min(_run([sys.executable, "-c", "pass"]) for _ in range(args.repeat))
    print(f"  {'(bare python3 start)':<52} {base:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
