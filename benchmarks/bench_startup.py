"""Start-up, first-run (cold / warm Numba cache) and fresh-clone test-suite times.

    python3 benchmarks/bench_startup.py            # start-up and first-run times
    python3 benchmarks/bench_startup.py --tests    # also: clone the repo, time the default
                                                   # test command (and -m slow separately)

Cold: ``NUMBA_CACHE_DIR`` points at a new empty folder, so every ``@njit(cache=True)``
kernel the command reaches is compiled; warm: the same command again with that folder
filled. Wall-clock seconds of a subprocess (python start-up included), best of one run —
on a shared machine repeat it and take the smallest.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = {
    "help": ["--help"],
    "analytical run (gpt2-small on tpu_like)": ["run", "tpu_like"],
    "cycle gemm, bandwidth memory (tpu_like 512^3)":
        ["gemm", "tpu_like", "--m", "512", "--n", "512", "--k", "512", "--fidelity", "cycle"],
    "cycle gemm, DRAM timing (tpu_like 256^3, memory.model=dram)":
        ["gemm", "tpu_like", "--m", "256", "--n", "256", "--k", "256", "--fidelity", "cycle",
         "--set", "units[0].memory.model=dram", "--set", "units[0].memory.preset=DDR4-2400"],
    "cycle gemv, DRAM PIM (pim_gpt 1x4096x4096)":
        ["gemm", "pim_gpt", "--m", "1", "--n", "4096", "--k", "4096", "--fidelity", "cycle"],
}


def timed(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, int]:
    t0 = time.perf_counter()
    p = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        print(f"  ({' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-300:]})")
    return dt, p.returncode


def first_runs() -> None:
    print(f"{'command':<62} {'cold s':>8} {'warm s':>8}")
    for label, argv in COMMANDS.items():
        cache = tempfile.mkdtemp(prefix="numba-cold-")
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        try:
            cold, _ = timed([sys.executable, "-m", "archsim", *argv], env)
            warm, _ = timed([sys.executable, "-m", "archsim", *argv], env)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        print(f"{label:<62} {cold:>8.2f} {warm:>8.2f}")


def fresh_clone_tests() -> None:
    with tempfile.TemporaryDirectory(prefix="archsim-clone-") as tmp:
        clone = Path(tmp) / "archsim"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(Path(tmp) / "numba")}
        for label, extra in (("default (README) test command", []),
                             ("slow tests (-m slow, run by .ci/run after)", ["-m", "slow"])):
            dt, rc = timed([sys.executable, "-m", "pytest", "-q", *extra], env, clone)
            print(f"{label:<62} {dt:>8.1f} s  (exit {rc})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", action="store_true", help="also time the test suite in a "
                    "fresh clone")
    args = ap.parse_args()
    print(f"cpus: {os.cpu_count()}, python {sys.version.split()[0]}")
    first_runs()
    if args.tests:
        fresh_clone_tests()


if __name__ == "__main__":
    main()
