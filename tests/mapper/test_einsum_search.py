"""The vectorised nest search: kernel == reference analysis; brute force == search.

The compiled kernel (mapper/nest_kernel.py) must count what dataflow.nest.analyse counts;
the search must find the optimum that exhaustive enumeration finds on a small 7-D problem.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from archsim.arch.timeloop import load_dir
from archsim.dataflow.einsum import conv2d
from archsim.dataflow.hierarchy import ComputeLevel, Hierarchy, StorageLevel
from archsim.dataflow.nest import LevelMapping, NestMapping, analyse
from archsim.mapper.einsum_search import (
    _sample,
    evaluate_batch,
    from_mapping,
    make_space,
    search,
    to_mapping,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "timeloop"


@pytest.mark.parametrize("design", ["eyeriss_like",
                                    pytest.param("simba_like", marks=pytest.mark.slow),
                                    pytest.param("simple_output_stationary",
                                                 marks=pytest.mark.slow)])
def test_kernel_matches_reference_analysis(design: str) -> None:
    des = load_dir(DATA / design, DATA / "default_problem.yaml")
    assert des.problem is not None and des.mapping is not None
    space = make_space(des.problem, des.hierarchy, des.constraints)
    keep = tuple(lm.keep for lm in des.mapping.levels)
    batch = _sample(space, np.random.default_rng(7), 300, keep)
    out = evaluate_batch(space, batch)
    ref = from_mapping(space, [des.mapping])
    assert evaluate_batch(space, ref)["energy_pj"][0] == pytest.approx(
        analyse(des.problem, des.hierarchy, des.mapping).energy_pj, rel=1e-12)
    feas = np.nonzero(out["feasible"])[0]
    infeas = np.nonzero(~out["feasible"])[0][:20]
    assert len(feas) >= 5
    for i in [*feas, *infeas]:
        res = analyse(des.problem, des.hierarchy, to_mapping(space, batch, int(i)))
        assert bool(out["feasible"][i]) == res.feasible
        if res.feasible:
            assert out["cycles"][i] == res.cycles
            assert out["energy_pj"][i] == pytest.approx(res.energy_pj, rel=1e-9)


def _small() -> tuple[Hierarchy, dict[str, frozenset[str]]]:
    # Synthetic 3-level design (energies illustrative, pJ per word: RF 0.1-0.2, GLB 2,
    # DRAM 64 — the order of magnitude of Eyeriss's 65 nm table, Chen et al. ISCA 2016).
    e_rf = {"read": 0.2, "write": 0.1, "update": 0.1}
    e_glb = {"read": 2.0, "write": 2.0, "update": 2.0, "leak": 0.001}
    hier = Hierarchy((StorageLevel("rf", instances=2, size_words=6, energy_pj=e_rf),
                      StorageLevel("glb", mesh_x=2, size_words=40, energy_pj=e_glb),
                      StorageLevel("dram", technology="DRAM",
                                   energy_pj={"read": 64.0, "write": 64.0, "update": 64.0})),
                     ComputeLevel("mac", 2, {"compute": 0.5}))
    all3 = frozenset({"Weights", "Inputs", "Outputs"})
    return hier, {"rf": all3, "glb": all3, "dram": all3}


def _brute_force(prob: object, hier: Hierarchy, keep: dict[str, frozenset[str]],
                 objective: str) -> float:
    """Every factorisation of every dim over (rf t, glb t, glb s, dram t) and every order of
    the loops of bound > 1 at each level (orders of bound-1 loops are equivalent)."""
    assert hasattr(prob, "dims")
    dims = list(prob.dims)  # type: ignore[attr-defined]
    per_dim = []
    for d in dims:
        n = prob.dims[d]  # type: ignore[attr-defined]
        per_dim.append([(a, b, c, n // (a * b * c)) for a in range(1, n + 1)
                        for b in range(1, n + 1) for c in range(1, 3)
                        if n % (a * b * c) == 0])
    best = math.inf
    for combo in itertools.product(*per_dim):
        rf = [(d, f[0]) for d, f in zip(dims, combo, strict=True) if f[0] > 1]
        glb = [(d, f[1]) for d, f in zip(dims, combo, strict=True) if f[1] > 1]
        sp = tuple((d, f[2], "X") for d, f in zip(dims, combo, strict=True) if f[2] > 1)
        dr = [(d, f[3]) for d, f in zip(dims, combo, strict=True) if f[3] > 1]
        for p0 in itertools.permutations(rf):
            for p1 in itertools.permutations(glb):
                for p2 in itertools.permutations(dr):
                    mp = NestMapping((LevelMapping(p0, (), keep["rf"]),
                                      LevelMapping(p1, sp, keep["glb"]),
                                      LevelMapping(p2, (), keep["dram"])))
                    res = analyse(prob, hier, mp)  # type: ignore[arg-type]
                    if res.feasible:
                        best = min(best, res.energy_pj if objective == "energy" else res.edp)
    return best


@pytest.mark.parametrize("objective", ["energy", "edp"])
def test_search_equals_brute_force_small_7d(objective: str) -> None:
    # 7-D conv with N=Q=S=1: C2 M2 P2 R2 (16 MACs), stride 1
    prob = conv2d(1, 2, 2, 2, 1, 2, 1)
    hier, keep = _small()
    expect = _brute_force(prob, hier, keep, objective)
    got = search(prob, hier, objective=objective, keep=keep, max_evaluations=200_000,
                 time_budget_s=60.0, batch_size=4096, seed=3)
    val = got.result.energy_pj if objective == "energy" else got.result.edp
    assert val == pytest.approx(expect, rel=1e-12)
