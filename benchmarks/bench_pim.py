"""Benchmark of the DRAM PIM command-level model: one GPT-2 XL decode token on pim_gpt.

    python3 benchmarks/bench_pim.py

Prints the wall time of one token (every channel simulated, persistent device state) and
DRAM commands per second; the first token warms the Numba cache and is not counted.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import archsim  # noqa: E402
from archsim.arch.pim.decode import decode_tokens  # noqa: E402


def main() -> None:
    acc = archsim.load("pim_gpt")
    decode_tokens(acc, "gpt2-small", 1, 16)          # JIT / cache warm-up
    for model in ("gpt2-small", "gpt2-xl"):
        rs = decode_tokens(acc, model, 2, 128)
        r = rs[-1]
        print(f"{model}: token latency {r.latency_s * 1e6:.1f} us, energy {r.energy_j * 1e3:.2f} mJ,"
              f" {r.commands} commands, wall {r.wall_s:.2f} s, "
              f"{r.commands / r.wall_s / 1e6:.2f} M commands/s, row-hit {r.row_hit_rate:.4f}")


if __name__ == "__main__":
    main()
