"""nm_sparse_fpga: estimate speed, and the sensitivity table of docs/fpga.md.

Run: python benchmarks/bench_fpga.py            (speed + sensitivity, ~30 s)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import archsim  # noqa: E402
from archsim.arch.fpga.reference import SAT_MODELS  # noqa: E402

#: variant -> (--set overrides of sat_vcu1525, batch)
VARIANTS: dict[str, tuple[list[str], int]] = {
    "reference": ([], 32),
    "batch 8": ([], 8),
    "batch 64": ([], 64),
    "loop_order: spatial": (["units[0].loop_order=spatial"], 32),
    "pregen.overlap: false": (["units[0].pregen.overlap=false"], 32),
    "vector_lanes: 32": (["units[0].vector_lanes=32"], 32),
    "act_buffer.width_bits: 2048": (["units[0].act_buffer.width_bits=2048"], 32),
    "one DDR4 channel (19.2 GB/s)": (["units[0].memory.bandwidth_gbps=19.2"], 32),
    "first draft: 32x32x2, 32 vector lanes, spatial order, no cap": (
        ["units[0].cols=32", "units[0].vector_lanes=32", "units[0].loop_order=spatial",
         "units[0].max_utilization=1.0", "units[0].out_buffer.width_bits=1024"], 32),
}


def speed() -> None:
    acc = archsim.load("sat_vcu1525")
    wl = archsim.workload("resnet50", phase="train", batch=32).with_sparsity(2, 8)
    t0 = time.perf_counter()
    archsim.evaluate(acc, wl)
    dt = time.perf_counter() - t0
    print(f"resnet50 train 2:8 evaluate: {len(wl)} ops in {dt:.2f} s "
          f"({len(wl) / dt:,.0f} ops/s incl. energy)")


def sensitivity() -> None:
    print("| variant | mean | " + ", ".join(SAT_MODELS) + " |")
    print("|---|---|---|")
    for label, (over, batch) in VARIANTS.items():
        acc = archsim.load("sat_vcu1525", over)
        s = []
        for name in SAT_MODELS:
            wl = archsim.workload(name, phase="train", batch=batch)
            s.append(archsim.evaluate(acc, wl).latency_s
                     / archsim.evaluate(acc, wl.with_sparsity(2, 8)).latency_s)
        print(f"| {label} | {sum(s) / len(s):.3f} | " + ", ".join(f"{x:.3f}" for x in s) + " |",
              flush=True)


if __name__ == "__main__":
    speed()
    sensitivity()
