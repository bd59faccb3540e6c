"""One table of archsim's speed figures, each with its target and the peer's figure.

    python3 -m benchmarks                 # every figure, cold and warm Numba cache
    python3 -m benchmarks --only llm,serve   # serve: its companion serve-cpu too
    python3 -m benchmarks --list

Each figure runs one existing benchmark script (or ``python3 -m archsim ...``) as a
subprocess, twice: **cold** with ``NUMBA_CACHE_DIR`` pointing at a new empty folder (every
``@njit(cache=True)`` kernel the command reaches compiles) and **warm** with that folder
filled. The table gives the figure the script prints (parsed from its stdout) and the
subprocess's CPU seconds (user + system, ``resource.getrusage(RUSAGE_CHILDREN)``): CPU
seconds do not grow when other jobs load the machine, wall seconds do. Targets are issue
30's; peers' figures are the ones quoted there (measured side by side on the 2-core
machine), except Ramulator 2's, measured on our DRAM traffic by
``benchmarks/peer_ramulator2.py`` (docs/simulator.md "Measured peer: Ramulator 2").
Numbers are printed, never asserted (STYLE.md: speed targets live here, not in timed
tests).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


@dataclass(frozen=True)
class Figure:
    """One row: the command, how to read its figure from stdout, the target and peer."""

    key: str
    label: str
    argv: tuple[str, ...]
    pattern: str          # regex with one group: the figure in ``unit`` (None: CPU-s itself)
    unit: str
    target: str
    peer: str = ""


def _archsim(*args: str) -> tuple[str, ...]:
    return (PY, "-m", "archsim", *args)


def _script(name: str, *args: str) -> tuple[str, ...]:
    return (PY, str(ROOT / "benchmarks" / name), *args)


FIGURES = (
    Figure("cycle", "first cycle run: gemm tpu_like 512^3",
           _archsim("gemm", "tpu_like", "--m", "512", "--n", "512", "--k", "512",
                    "--fidelity", "cycle"), "", "CPU-s", "< 20 s cold"),
    Figure("dram", "first cycle run with DRAM timing (tpu_like 256^3, DDR4-2400)",
           _archsim("gemm", "tpu_like", "--m", "256", "--n", "256", "--k", "256",
                    "--fidelity", "cycle", "--set", "units[0].memory.model=dram",
                    "--set", "units[0].memory.preset=DDR4-2400"), "", "CPU-s", "< 20 s cold"),
    Figure("pim", "first cycle run: pim_gpt gpt2-xl decode, context 1023",
           _archsim("run", "pim_gpt", "--model", "gpt2-xl", "--phase", "decode", "--context",
                    "1023", "--fidelity", "cycle"), "", "CPU-s", "< 20 s cold"),
    Figure("llm", "four LLM evaluations (Llama-2-70B TP8 H100, Llama-3-8B A100)",
           _script("bench_llm.py", "--repeat", "2"),
           r"\*\*all four\*\* \| [0-9.]+ \| ([0-9.]+)", "CPU-s warm", "<= 0.5",
           "GenZ 4.3, llm-analysis 0.86"),
    Figure("serve", "serving simulation, 10k requests, Llama-3 70B TP8 (warm memo)",
           _script("bench_serve.py"), r"warm ([0-9.]+) s", "s wall", "<= 2",
           "LLMServingSim 2.0: ~86 s for 300 requests"),
    Figure("serve-cpu", "the same, CPU seconds of the warm simulation",
           _script("bench_serve.py"), r"warm CPU ([0-9.]+) s", "CPU-s", "<= 2",
           "LLMServingSim 2.0: ~86 s for 300 requests"),
    Figure("engine", "event engine, 1M-task random graph",
           _script("bench_sim.py", "--requests", "100000", "--repeat", "5"),
           r"record_task_times=False: [0-9.]+ CPU-s, ([0-9.]+) M events/CPU-s",
           "M events/CPU-s", ">= 20", "a C++ binary heap: ~20"),
    Figure("dramrate", "DRAM controller, DDR4-2400 random requests",
           _script("bench_sim.py", "--tasks", "100000", "--requests", "200000", "--repeat",
                   "2"), r"DDR4-2400 random\s*:.*?([0-9.]+) M commands/CPU-s", "M cmd/CPU-s",
           ">= 10", "Ramulator 2, measured: 0.27 (0.58 with its own trace frontend)"),
    Figure("pimrate", "DRAM PIM command stream, one GPT-2 XL decode token (pim_gpt)",
           _script("bench_pim.py"), r"gpt2-xl:.*?([0-9.]+) M commands/CPU-s", "M cmd/CPU-s",
           ">= 10", "Ramulator 2 (plain DRAM, no PIM), measured: 0.17-0.82"),
    Figure("sweep", "analytical sweep, 1000 points, 2 local workers",
           _script("bench_sweep.py", "--no-json"), r"([0-9.]+) points/s", "points/s",
           ">= 100"),
    Figure("sweep-cpu", "the same, points per CPU-second (driver + workers; 2 idle cores: x2)",
           _script("bench_sweep.py", "--no-json"), r"([0-9.]+) points per CPU-second",
           "points/CPU-s", ">= 50"),
    Figure("mapper", "archsim map eyeriss_like --model resnet50",
           _archsim("map", "eyeriss_like", "--model", "resnet50"), "", "CPU-s", "<= 3 warm",
           "ZigZag: 18-24x slower"),
)


def _group(f: Figure) -> str:
    """The key a figure's companions share (``sweep`` for ``sweep-cpu``): ``--only sweep``
    prints both."""
    return f.key.split("-")[0]


def run_once(argv: tuple[str, ...], env: dict[str, str]) -> tuple[float, float, str, int]:
    """(CPU-s, wall s, stdout, exit code) of one subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, p.stdout + p.stderr, p.returncode


def value(fig: Figure, cpu: float, out: str, rc: int) -> str:
    """The figure of one run: parsed from its output, or its CPU seconds."""
    if rc != 0:
        return f"exit {rc}"
    if not fig.pattern:
        return f"{cpu:.2f}"
    m = re.search(fig.pattern, out)
    return m.group(1) if m else "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m benchmarks", description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated keys (--list shows them)")
    ap.add_argument("--list", action="store_true", help="list the figures and exit")
    args = ap.parse_args(argv)
    figs = FIGURES
    if args.list:
        for f in figs:
            print(f"{f.key:9s} {f.label}")
        return 0
    if args.only:
        keys = {k.strip() for k in args.only.split(",")}
        unknown = keys - {f.key for f in figs} - {_group(f) for f in figs}
        if unknown:
            print(f"error: --only: unknown figure(s) {', '.join(sorted(unknown))}; expected "
                  f"some of {', '.join(f.key for f in figs)}", file=sys.stderr)
            return 2
        figs = tuple(f for f in figs if f.key in keys or _group(f) in keys)
    print("| figure | unit | cold | warm | cold CPU-s | warm CPU-s | target | peer |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    runs: dict[tuple[str, ...], tuple[float, str, int, float, str, int]] = {}
    for f in figs:
        if f.argv not in runs:          # rows reading other figures of one command share it
            cache = tempfile.mkdtemp(prefix="archsim-bench-numba-")
            env = {**os.environ, "NUMBA_CACHE_DIR": cache}
            try:
                c_cpu, _, c_out, c_rc = run_once(f.argv, env)
                w_cpu, _, w_out, w_rc = run_once(f.argv, env)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            runs[f.argv] = (c_cpu, c_out, c_rc, w_cpu, w_out, w_rc)
        c_cpu, c_out, c_rc, w_cpu, w_out, w_rc = runs[f.argv]
        print(f"| {f.label} | {f.unit} | {value(f, c_cpu, c_out, c_rc)} | "
              f"{value(f, w_cpu, w_out, w_rc)} | {c_cpu:.2f} | {w_cpu:.2f} | {f.target} | "
              f"{f.peer} |", flush=True)
    print(f"\n(python3 -m benchmarks{' --only ' + args.only if args.only else ''}; CPU seconds "
          f"of each subprocess; load average {os.getloadavg()[0]:.1f} at the end)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
