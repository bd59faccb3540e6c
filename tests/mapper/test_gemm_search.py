"""Mapping search: brute-force optimality, feasibility of results, vectorised == scalar."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from archsim.dataflow import ArchParams, Mapping, Shape, cost, feasible
from archsim.mapper.gemm_search import (
    PERMS,
    arch_params,
    best_mapping,
    clear_cache,
    dim_options,
    evaluate_batch,
    from_arrays,
    search,
    to_arrays,
)

P = ArchParams(rows=2, cols=2, rf_bytes=24, glb_bytes=160, dram_bytes_per_cycle=2,
               a_bytes=1, b_bytes=1, psum_bytes=4, out_bytes=1,
               e_mac_pj=1, e_rf_pj=1, e_glb_pj=6, e_dram_pj_per_byte=100)
DFS = ("ws", "os", "is")


def _splits(n: int):
    divs = [d for d in range(1, n + 1) if n % d == 0]
    return [t for t in itertools.product(divs, repeat=5) if math.prod(t) == n]


def brute_force(shape: Shape, p: ArchParams, objective: str):
    """Independent enumeration with the scalar reference model and feasibility check."""
    best = math.inf
    perms = list(itertools.permutations(range(3)))
    for sm, sn, sk in itertools.product(*(_splits(d) for d in shape.dims)):
        factors = tuple((sm[s], sn[s], sk[s]) for s in range(5))
        for og, od in itertools.product(perms, perms):
            for df in DFS:
                m = Mapping(factors, (og, od), frozenset(), df)
                if feasible(m, shape, p):
                    continue
                c = cost(m, shape, p)
                v = {"latency": c.cycles, "energy": c.energy_pj,
                     "edp": c.cycles * c.energy_pj}[objective]
                best = min(best, v)
    return best


@pytest.mark.parametrize("shape", [Shape(4, 2, 4), Shape(2, 4, 3), Shape(3, 2, 4, batch=2)])
@pytest.mark.parametrize("objective", ["latency", "energy", "edp"])
def test_search_matches_brute_force(shape, objective):
    opt = brute_force(shape, P, objective)
    r = search(shape, P, objective, DFS, use_cache=False)
    assert r is not None and r.exhaustive
    assert r.value == pytest.approx(opt, rel=1e-12)
    assert feasible(r.mapping, shape, P) == []
    c = cost(r.mapping, shape, P)
    v = {"latency": c.cycles, "energy": c.energy_pj, "edp": c.cycles * c.energy_pj}[objective]
    assert v == pytest.approx(opt, rel=1e-12)


@pytest.mark.parametrize("shape", [Shape(16, 8, 12), Shape(8, 12, 16), Shape(24, 8, 8)])
@pytest.mark.parametrize("objective", ["latency", "energy", "edp"])
def test_sampling_within_2pct_of_exhaustive(shape, objective):
    p = ArchParams(rows=4, cols=4, rf_bytes=64, glb_bytes=1024, dram_bytes_per_cycle=4)
    ex = search(shape, p, objective, DFS, use_cache=False, exhaustive_limit=10**9)
    rs = search(shape, p, objective, DFS, use_cache=False, exhaustive_limit=0, samples=512)
    assert ex.exhaustive and not rs.exhaustive
    assert rs.value <= ex.value * 1.02
    assert feasible(rs.mapping, shape, p) == []


def test_vectorised_equals_scalar():
    rng = np.random.default_rng(3)
    shape = Shape(12, 8, 6, batch=2)
    opts = [dim_options(d, (True, True, True), 4, 4, 64) for d in shape.dims]
    B = 300
    idx = np.stack([rng.integers(0, len(o), B) for o in opts], axis=1)
    F = np.stack([opts[d][idx[:, d]] for d in range(3)], axis=2)
    pg, pd = rng.integers(0, 6, B), rng.integers(0, 6, B)
    p = ArchParams(rows=4, cols=4, rf_bytes=40, glb_bytes=600, dram_bytes_per_cycle=3,
                   a_bytes=2, b_bytes=1, psum_bytes=4, out_bytes=2)
    ev = evaluate_batch(F, pg, pd, shape, p)
    for i in range(B):
        m = from_arrays(F[i], pg[i], pd[i], "free")
        c = cost(m, shape, p)
        assert ev["cycles"][i] == pytest.approx(c.cycles)
        assert ev["energy_pj"][i] == pytest.approx(c.energy_pj)
        assert ev["dram_bytes"][i] == pytest.approx(c.dram_bytes)
        assert bool(ev["feasible"][i]) == (feasible(m, shape, p) == [])
    F2, pg2, pd2 = to_arrays([from_arrays(F[0], pg[0], pd[0], "free")])
    assert (F2[0] == F[0]).all() and pg2[0] == pg[0] and (PERMS[pd2[0]] == PERMS[pd[0]]).all()


def test_dim_options_exact_and_pruned():
    o = dim_options(12, (True, False, True), 3, 4, 2)
    assert (o.prod(axis=1) == 12).all()
    assert (o[:, 0] <= 3).all() and (o[:, 1] == 1).all() and (o[:, 2] <= 2).all()
    assert len({tuple(r) for r in o}) == len(o)


def test_nothing_fits_returns_none():
    p = ArchParams(rows=1, cols=1, rf_bytes=1, glb_bytes=1, dram_bytes_per_cycle=1)
    assert search(Shape(2, 2, 2), p, "latency", DFS, use_cache=False) is None


def test_unknown_objective():
    with pytest.raises(ValueError):
        search(Shape(2, 2, 2), P, "speed", DFS, use_cache=False)


def test_best_mapping_on_eyeriss_like():
    from archsim.arch.accelerator import load
    from archsim.workloads.ops import Conv2d, Softmax

    unit = load("configs/spatial/eyeriss_like.yaml").units[0]
    from archsim.workloads.formats import FORMATS

    i8 = FORMATS["int8"]  # eyeriss_like multiplies 16-bit fixed point: fp16 is unsupported
    op = Conv2d(name="c", n=1, c=64, h=56, w=56, k=64, r=3, s=3, padding=1, a_format=i8,
                w_format=i8)
    clear_cache()
    r = best_mapping(unit, op, "edp")
    assert r is not None and r.mapping.dataflow in unit.dataflows()
    p = arch_params(unit, op)
    assert feasible(r.mapping, Shape.of(op), p) == []
    assert 0 < r.cost.utilization <= 1.0
    assert r.cost.cycles >= op.macs() / (p.rows * p.cols)
    assert best_mapping(unit, op, "edp") is r                    # cache hit
    assert best_mapping(unit, Softmax(name="s", rows=4, cols=4)) is None
    est = unit.estimate(op, r.mapping)                           # .dataflow is accepted
    assert est.feasible or est.reason


def test_divisors_closed_form_and_huge_dimensions():
    from archsim.mapper.factors import divisors

    assert divisors(1) == [1] and divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]
    assert divisors(97) == [1, 97]
    # 720720 = 2^4 3^2 5 7 11 13: (4+1)(2+1)(1+1)^4 = 240 divisors
    assert len(divisors(720720)) == 240
    # 99999999999 = 3^2 x 21649 x 513239 (a fuzzed --m): 3 x 2 x 2 = 12, found at once
    assert divisors(99999999999) == [1, 3, 9, 21649, 64947, 194841, 513239, 1539717, 4619151,
                                     11111111111, 33333333333, 99999999999]


def test_search_on_huge_dimensions_answers(capsys):
    """The fuzzed call that hung (a scan of 1e11 candidate divisors): it now answers."""
    import json
    import math

    from archsim.cli import main

    assert main(["gemm", "spatial/tpu_like", "--m", "99999999999", "--n", "99999999999",
                 "--k", "64", "--mapping", "search", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert math.isfinite(d["latency_s"]) and d["latency_s"] > 0
