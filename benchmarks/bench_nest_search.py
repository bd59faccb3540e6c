"""Nest-mapping search on Timeloop's four example designs: quality and speed (one core).

Run: ``python3 benchmarks/bench_nest_search.py [budget_s]`` (default 8 s per search).
For each design and objective (energy, EDP) it prints Timeloop's reference mapping
(tests/data/timeloop, evaluated by our model, which equals Timeloop's stats) against the
best mapping our search finds within the budget, and the evaluation rates.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from archsim.arch.timeloop import load_dir  # noqa: E402
from archsim.dataflow.nest import analyse  # noqa: E402
from archsim.mapper.einsum_search import search  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "timeloop")
DESIGNS = ["eyeriss_like", "simba_like", "simple_output_stationary", "simple_weight_stationary"]


def main(budget: float) -> None:
    print("| design | objective | Timeloop ref | ours | ours/ref | evaluations | "
          "evals/s (all) | evals/s (full analysis) | time s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in DESIGNS:
        des = load_dir(os.path.join(DATA, d))
        assert des.problem is not None and des.mapping is not None
        ref = analyse(des.problem, des.hierarchy, des.mapping)
        for obj in ("energy", "edp"):
            t = time.perf_counter()
            r = search(des.problem, des.hierarchy, des.constraints, objective=obj,
                       time_budget_s=budget, seed=0)
            dt = time.perf_counter() - t
            a, b = ((ref.energy_pj / 1e6, r.result.energy_pj / 1e6) if obj == "energy"
                    else (ref.edp, r.result.edp))
            unit = " uJ" if obj == "energy" else " J*cyc"
            print(f"| {d} | {obj} | {a:.2f}{unit} | {b:.2f}{unit} | {b / a:.3f} | "
                  f"{r.evaluations:,} | {r.evals_per_s:,.0f} | "
                  f"{r.feasible_evaluations / r.seconds:,.0f} | {dt:.1f} |")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 8.0)
