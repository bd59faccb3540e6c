"""User mapping constraints (mapper/constraints.py): strict YAML, merging, and their effect
on the search and the op -> unit assignment."""

from __future__ import annotations

import itertools
import math

import pytest

import archsim
from archsim.arch import load_data
from archsim.dataflow import ArchParams, Mapping, Shape, cost, feasible
from archsim.dataflow.mapping import DRAM, GLB, SCOL, SROW
from archsim.mapper import map_workload
from archsim.mapper.constraints import load_constraints, parse_constraints
from archsim.mapper.gemm_search import search
from archsim.workloads.errors import MappingError
from archsim.workloads.graph import Workload
from archsim.workloads.ops import Conv2d, Gemm, Softmax
from tests.conftest import spatial_config

GOOD = """\
rules:
  - kind: conv2d
    dataflow: [ws, os]
  - ops: "layer1.*"
    kind: conv2d
    unit: arr
    dataflow: os
    factors:
      rows: {M: 4}
      glb: {K: 2}
    loop_order: {glb: KNM}
"""


def test_parse_and_merge():
    c = parse_constraints(GOOD, "cons.yaml")
    assert len(c.rules) == 2 and c.rules[1].line == 4
    conv = Conv2d(name="layer1.0.conv1", n=1, c=8, h=8, w=8, k=8, r=3, s=3, padding=1)
    oc = c.for_op(conv)
    assert oc.dataflows == ("os",)             # the later rule overrides
    assert oc.units == ("arr",)
    assert oc.fixed == ((SROW, 0, 4), (GLB, 2, 2))
    assert oc.order_glb == (2, 1, 0) and oc.order_dram is None and oc.needs_search
    other = Conv2d(name="layer2.0.conv1", n=1, c=8, h=8, w=8, k=8, r=3, s=3, padding=1)
    assert c.for_op(other).dataflows == ("ws", "os") and not c.for_op(other).needs_search
    assert c.for_op(Softmax(name="layer1.sm", rows=4, cols=4)) is None   # kind mismatch


def test_every_problem_reported_with_file_line():
    bad = """\
rules:
  - ops: "*"
    kinds: conv2d
    factors:
      rows: {Q: 4}
      spatial: {M: 2}
      cols: {N: 0}
    loop_order: {glb: MMK, l2: MNK}
  - kind: nosuchop
    dataflow: 3
other: 1
"""
    with pytest.raises(MappingError) as ei:
        parse_constraints(bad, "c.yaml")
    msgs = [str(p) for p in ei.value.problems]
    text = "\n".join(msgs)
    for want in ("c.yaml:3 rules[0].kinds: unknown key", "c.yaml:5 rules[0].factors.rows.Q",
                 "c.yaml:6 rules[0].factors.spatial: unknown slot",
                 "c.yaml:7 rules[0].factors.cols.N: expected an int >= 1",
                 "c.yaml:8 rules[0].loop_order.glb: expected a permutation of MNK",
                 "c.yaml:8 rules[0].loop_order.l2: unknown level",
                 "c.yaml:9 rules[1].kind", "c.yaml:10 rules[1].dataflow",
                 "c.yaml:11 other: unknown key"):
        assert want in text, (want, text)
    assert len(msgs) == 9


def test_duplicate_key_and_missing_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rules:\n  - unit: a\n    unit: b\n")
    with pytest.raises(MappingError, match=r"c.yaml:3.*duplicate key 'unit'"):
        load_constraints(p)
    with pytest.raises(MappingError, match="cannot read file"):
        load_constraints(tmp_path / "missing.yaml")


def _acc(**kw):
    return load_data(spatial_config(rows=4, cols=4, bandwidth_gbps=2.0, glb_kib=16, **kw))


def _wl() -> Workload:
    w = Workload("w")
    a = w.add(Gemm(name="fc1", m=16, n=32, k=24))
    w.add(Gemm(name="fc2", m=16, n=8, k=32), [a])
    return w


def test_unknown_unit_and_dataflow_name_the_line():
    cons = parse_constraints("rules:\n  - unit: gpu\n  - dataflow: rs\n", "c.yaml")
    with pytest.raises(MappingError) as ei:
        map_workload(_acc(), _wl(), constraints=cons)
    text = str(ei.value)
    assert "c.yaml:2 rules[0].unit: unknown unit 'gpu'" in text
    assert "c.yaml:3 rules[1].dataflow: no unit of this design has dataflow 'rs'" in text


def test_dataflow_restriction_default_and_search():
    cons = parse_constraints("rules:\n  - ops: 'fc*'\n    dataflow: is\n")
    for search_mode in (False, True):
        s = map_workload(_acc(), _wl(), search=search_mode, constraints=cons)
        assert all(a.estimate.dataflow == "is" for a in s.assignments)


def test_fixed_factors_and_order_are_obeyed_and_feasible():
    cons = parse_constraints("rules:\n  - ops: fc1\n    dataflow: ws\n    factors:\n"
                             "      rows: {K: 4}\n      cols: {N: 2}\n      dram: {M: 2}\n"
                             "    loop_order: {dram: KNM}\n")
    acc = _acc()
    s = map_workload(acc, _wl(), constraints=cons)        # factors force the search
    a = s.assignments[0]
    m = a.mapping.nest                                      # the unit's typed mapping
    assert isinstance(m, Mapping) and m.dataflow == "ws" == a.mapping.dataflow
    assert m.factors[SROW][2] == 4 and m.factors[SCOL][1] == 2 and m.factors[DRAM][0] == 2
    assert m.order[1] == (2, 1, 0)
    u = acc.units[0]
    assert feasible(m, Shape.of(a.op), u.arch_params(a.op)) == []
    assert s.assignments[1].mapping == u.parse_mapping(None)  # fc2 unconstrained: default


P = ArchParams(rows=2, cols=2, rf_bytes=24, glb_bytes=160, dram_bytes_per_cycle=2,
               a_bytes=1, b_bytes=1, psum_bytes=4, out_bytes=1)


def _splits(n: int):
    divs = [d for d in range(1, n + 1) if n % d == 0]
    return [t for t in itertools.product(divs, repeat=5) if math.prod(t) == n]


@pytest.mark.parametrize("fixed,og", [(((SROW, 2, 2),), None), (((GLB, 0, 2),), (1, 0, 2)),
                                      ((), (2, 1, 0))])
def test_constrained_search_equals_constrained_brute_force(fixed, og):
    """Independent enumeration of every mapping that satisfies the constraints."""
    shape = Shape(4, 2, 4)
    best = math.inf
    perms = list(itertools.permutations(range(3)))
    for sm, sn, sk in itertools.product(*(_splits(d) for d in shape.dims)):
        f = tuple((sm[s], sn[s], sk[s]) for s in range(5))
        if any(f[s][d] != v for s, d, v in fixed):
            continue
        for o_g, o_d in itertools.product(perms, perms):
            if og is not None and o_g != og:
                continue
            for df in ("ws", "os", "is"):
                m = Mapping(f, (o_g, o_d), frozenset(), df)
                if not feasible(m, shape, P):
                    best = min(best, cost(m, shape, P).cycles)
    r = search(shape, P, "latency", ("ws", "os", "is"), fixed=fixed, order_glb=og,
               use_cache=False)
    assert r is not None and r.value == best
    assert all(r.mapping.factors[s][d] == v for s, d, v in fixed)
    if og is not None:
        assert r.mapping.order[0] == og


def test_infeasible_constraint_names_the_op_and_line():
    # 5 does not divide K = 24 of fc1
    cons = parse_constraints("rules:\n  - ops: fc1\n    factors: {rows: {K: 5}}\n", "c.yaml")
    with pytest.raises(MappingError) as ei:
        map_workload(_acc(), _wl(), constraints=cons)
    text = str(ei.value)
    assert "c.yaml:2 rules[0]" in text and "op 'fc1'" in text
    assert "no loop-nest mapping satisfies the constraints" in text


def test_unit_pinning_and_evaluate_with_file(tmp_path):
    acc = archsim.load("configs/hetero/nvdla_shidiannao.yaml")
    wl = archsim.workload("resnet18", a_format="int8", w_format="int8")
    p = tmp_path / "cons.yaml"
    p.write_text("rules:\n  - kind: conv2d\n    unit: shidiannao\n")
    res = archsim.evaluate(acc, wl, constraints=str(p))
    assert all(o.unit == "shidiannao" for o in res.ops if o.kind == "conv2d")
    free = archsim.evaluate(acc, wl)
    assert res.input_hash != free.input_hash
    assert res.latency_s > free.latency_s      # the 64-PE unit is slower on every conv


def test_gpu_dataflow_constraint_is_searched_like_any_family():
    """A GPU constraint ``dataflow: gemm_splitk`` is honoured through the GPU's own
    mapping space (no spatial-only special case)."""
    import archsim

    cons = parse_constraints("rules:\n  - kind: gemm\n    dataflow: gemm_splitk\n")
    acc = archsim.load("gpu/a100")
    s = map_workload(acc, archsim.gemm_workload(8192, 8192, 8192), constraints=cons)
    a = s.assignments[0]
    assert a.mapping.dataflow == "gemm_splitk" and a.estimate.details["split_k"] > 1
