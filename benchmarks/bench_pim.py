"""Benchmark of the DRAM PIM command-level model: one GPT-2 XL decode token on pim_gpt.

    python3 benchmarks/bench_pim.py

Prints the CPU seconds of one token (every channel simulated, persistent device state:
command streams and the Python planning around them) and DRAM commands per CPU-second
(issue 30's target: >= 10 M); the first token warms the Numba cache and is not counted.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import archsim  # noqa: E402
from archsim.arch.pim.decode import decode_tokens  # noqa: E402


def main() -> None:
    acc = archsim.load("pim_gpt")
    decode_tokens(acc, "gpt2-small", 1, 16)          # JIT / cache warm-up
    for model in ("gpt2-small", "gpt2-xl"):
        c0 = time.process_time()
        rs = decode_tokens(acc, model, 2, 128)
        cpu = (time.process_time() - c0) / len(rs)  # per token
        r = rs[-1]
        cmds = sum(x.commands for x in rs) / len(rs)
        print(f"{model}: token latency {r.latency_s * 1e6:.1f} us, energy {r.energy_j * 1e3:.2f} mJ,"
              f" {r.commands} commands, {cpu:.2f} CPU-s per token (wall {r.wall_s:.2f} s), "
              f"{cmds / cpu / 1e6:.2f} M commands/CPU-s, row-hit {r.row_hit_rate:.4f}")


if __name__ == "__main__":
    main()
