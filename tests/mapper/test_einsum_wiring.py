"""The spatial array on the Einsum nest model (``arch/spatial/einsum.py``): the mapper's
search offers a matrix op's Einsum nest next to its GEMM-view nests."""

from __future__ import annotations

import math

import pytest

import archsim
from archsim.arch.spatial.einsum import word_bytes
from archsim.mapper.schedule import _einsum_best
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Conv2d, Gemm

I16 = FORMATS["int16"]
#: a 3x3 convolution with a sliding window (stride 1, pad 1): 32 -> 32 channels, 14 x 14
CONV = Conv2d(name="c", n=1, c=32, h=14, w=14, k=32, r=3, s=3, stride=1, padding=1,
              a_format=I16, w_format=I16)


def _unit():
    return archsim.load("eyeriss_like").units[0]


def test_matrix_ops_have_an_einsum_space():
    """Convolutions and (batched) GEMMs map through the Einsum search (issue 28 item 3;
    before it only convolutions did); vector ops have no Einsum."""
    from archsim.workloads.ops import Softmax

    u = _unit()
    assert u.einsum_space(CONV) is not None
    prob, _ = u.einsum_space(Gemm(name="g", m=8, n=8, k=8, a_format=I16, w_format=I16))
    assert prob.dims == {"M": 8, "N": 8, "K": 8}
    prob, _ = u.einsum_space(Gemm(name="av", m=8, n=8, k=8, batch=8, b_shared=4,
                                  a_format=I16, w_format=I16))
    assert prob.dims == {"B": 2, "G": 4, "M": 8, "N": 8, "K": 8}
    assert u.einsum_space(Softmax(name="s", rows=4, cols=4, a_format=I16)) is None


def test_einsum_estimate_keeps_the_contract():
    u = _unit()
    nest = _einsum_best(u.einsum_space(CONV), "energy")
    m = u.parse_mapping(nest)
    assert m.dataflow == "nest7d" and u.parse_mapping(m) == m
    e = u.estimate(CONV, m)
    assert e.feasible and e.dataflow == "nest7d" and e.mapping.startswith("nest7d ")
    assert e.cycles >= math.floor(u.roofline_cycles(CONV, m))
    # DRAM traffic never below the compulsory bytes: every input, weight and output word
    # once (words of max(activation, weight) bytes)
    wb = word_bytes(CONV)
    ifmap = CONV.n * CONV.c * (CONV.p - 1 + CONV.r) * (CONV.q - 1 + CONV.s) * wb
    assert e.dram_read_bytes >= CONV.weight_bytes() + min(ifmap, CONV.input_bytes())
    assert {c for c, _ in e.actions} <= {c.name for c in u.components()}
    assert u.estimate(CONV, m) == e                          # deterministic
    # the lowering pipelines the same totals: simulation within 5% of the estimate
    assert u.simulate(CONV, m) == pytest.approx(e.cycles, rel=0.05)


def test_search_is_deterministic_and_vector_ops_refuse_an_einsum_mapping():
    u = _unit()
    space = u.einsum_space(CONV)
    from archsim.mapper.einsum_search import search

    a = search(*space, objective="edp", time_budget_s=float("inf"), max_evaluations=5000,
               seed=3).mapping
    b = search(*space, objective="edp", time_budget_s=float("inf"), max_evaluations=5000,
               seed=3).mapping
    assert a == b
    from archsim.workloads.ops import Softmax

    assert not u.estimate(Softmax(name="s", rows=4, cols=4, a_format=I16), a).feasible


def test_more_candidates_never_worsen_the_mapped_energy():
    """With the Einsum nests among the candidates, the energy-optimal search of a network
    is never worse than with the im2col GEMM nests alone (the mapper keeps the best)."""
    acc = archsim.load("eyeriss_like")
    from archsim.workloads.graph import Workload

    w = Workload(name="one_conv")
    w.add(CONV)
    with_nest = archsim.evaluate(acc, w, mapping="search", objective="energy")
    for u in acc.units:
        u.einsum_space = lambda op: None                       # type: ignore[method-assign]
    gemm_only = archsim.evaluate(acc, w, mapping="search", objective="energy")
    assert with_nest.energy_j <= gemm_only.energy_j * (1 + 1e-12)
    assert with_nest.ops[0].dataflow == "nest7d" or with_nest.energy_j == gemm_only.energy_j
