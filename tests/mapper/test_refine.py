"""Top-k refinement of mappings with the cycle simulator (mapper.gemm_search.refine_with_simulation)."""

from __future__ import annotations

import archsim
from archsim.mapper.gemm_search import best_mapping, refine_with_simulation, top_mappings
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Gemm

INT8 = FORMATS["int8"]


def _op(m: int, n: int, k: int) -> Gemm:
    return Gemm(name="g", m=m, n=n, k=k, a_format=INT8, w_format=INT8)


def test_top_mappings_are_distinct_and_start_with_the_best():
    u = archsim.load("eyeriss_like").units[0]
    op = _op(196, 256, 2304)
    top = top_mappings(u, op, "latency", 4)
    assert 1 <= len(top) <= 4
    assert len({r.mapping for r in top}) == len(top)
    best = best_mapping(u, op, "latency")
    lat = [u.estimate(op, r.mapping).cycles for r in top]
    assert lat == sorted(lat)
    assert lat[0] == u.estimate(op, best.mapping).cycles


def test_refinement_picks_the_simulated_minimum():
    u = archsim.load("eyeriss_like").units[0]
    op = _op(64, 1000, 512)
    win, rows = refine_with_simulation(u, op, "latency", 4)
    sims = [s for _, _, s in rows]
    assert win is not None
    assert u.simulate(op, win.mapping) == min(sims)
    # the simulation never beats the estimate's compute-only fold bound
    assert all(s >= 0.99 * e for _, e, s in rows)


def test_evaluate_with_refinement_runs():
    acc = archsim.load("eyeriss_like")
    wl = archsim.gemm_workload(64, 1000, 512, a_format="int8")
    plain = archsim.evaluate(acc, wl, mapping="search")
    ref = archsim.evaluate(acc, wl, mapping="search", refine=3)
    assert ref.input_hash != plain.input_hash
    assert ref.latency_s > 0 and ref.ops[0].mapping
