"""Speed of the tensor-core GPU estimate (ops per second). Run: python benchmarks/bench_gpu.py"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from archsim import arch  # noqa: E402
from archsim.workloads.formats import FORMATS  # noqa: E402
from archsim.workloads.ops import Gemm, Softmax  # noqa: E402


def main() -> None:
    for name in ("a100", "h200"):
        u = arch.load(ROOT / "configs" / "gpu" / f"{name}.yaml").units[0]
        ops = [Gemm(name="g", m=m, n=n, k=4096, w_format=FORMATS[w], group_size=128)
               for m in (1, 16, 128, 1024, 8192) for n in (4096, 14336) for w in ("fp16", "int4")]
        ops += [Softmax(name="s", rows=4096, cols=c) for c in (128, 4096)]
        t0 = time.perf_counter()
        reps = 5
        for _ in range(reps):
            for op in ops:
                u.estimate(op)
        dt = time.perf_counter() - t0
        print(f"{name}: {reps * len(ops) / dt:,.0f} estimates/s ({dt / (reps * len(ops)) * 1e3:.2f} ms each)")


if __name__ == "__main__":
    main()
