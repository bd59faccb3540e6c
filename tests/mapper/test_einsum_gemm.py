"""GEMMs and attention on the Einsum nest path (issue 28, item 3): a GEMM-view mapping
counted by the Einsum nest model gives the same counts (identity), named dataflows are
constraints of the Einsum search (ws keeps the weights in the PE register), and batched /
attention GEMMs keep their batch and head dims as loops."""

from __future__ import annotations

import math

import pytest

import archsim
from archsim.arch.spatial.einsum import from_gemm_mapping, problem_and_hierarchy
from archsim.dataflow import mapping as gemm_view
from archsim.dataflow.nest import analyse, lower_bound_cycles
from archsim.mapper import schedule
from archsim.mapper.einsum_dataflow import dataflow_constraints, roles
from archsim.mapper.einsum_search import search
from archsim.mapper.gemm_search import best_mapping
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Gemm

I16 = FORMATS["int16"]


def _unit():
    return archsim.load("eyeriss_like").units[0]


@pytest.mark.parametrize("objective", ["latency", "energy", "edp"])
def test_gemm_mapping_through_the_einsum_model_is_the_same_nest(objective: str) -> None:
    unit = _unit()
    op = Gemm(name="g", m=64, n=96, k=128, a_format=I16, w_format=I16)
    m = best_mapping(unit, op, objective).mapping
    counts = gemm_view.analyse(m, gemm_view.Shape.of(op))
    prob, hier = problem_and_hierarchy(unit, op)
    res = analyse(prob, hier, from_gemm_mapping(m))
    assert res.feasible
    for t, ds in (("A", "A"), ("B", "B"), ("C", "Z")):
        for lv, nl in (("RF", "pe_reg"), ("GLB", "glb"), ("DRAM", "dram")):
            st = res.stats[nl][ds]
            n = st.instances
            assert counts.get(t, lv, "fills") == st.fills * n
            assert counts.get(t, lv, "updates") == st.updates * n
            if t != "C" or lv == "DRAM":
                assert counts.get(t, lv, "reads") == st.reads * n
            else:   # the nest elides the read before each output's first write (Timeloop)
                assert counts.get(t, lv, "reads") - st.reads * n == st.partition_size * n
    e_gemm = unit.estimate(op, unit.parse_mapping(m))
    e_nest = unit.estimate(op, unit.parse_mapping(from_gemm_mapping(m)))
    assert e_gemm.cycles == e_nest.cycles == res.cycles


def test_ws_constraint_keeps_the_weights_in_the_pe_register() -> None:
    unit = _unit()
    op = Gemm(name="qk", m=64, n=64, k=32, batch=8, b_shared=2, a_format=I16, w_format=I16)
    prob, hier = problem_and_hierarchy(unit, op)
    assert set(prob.dims) == {"B", "G", "M", "N", "K"}     # batch and GQA group dims kept
    w, _, o = roles(prob)
    cons = dataflow_constraints(prob, "ws", "glb", "pe_reg")
    r = search(prob, hier, cons, objective="energy", time_budget_s=float("inf"),
               max_evaluations=8192, seed=0)
    res, mp = r.result, r.mapping
    dw, do = prob.space(w).dims(), prob.space(o).dims()
    reg = mp.levels[0]
    rf_loops = math.prod(b for _, b in reg.temporal)
    st = res.stats["pe_reg"][w]
    assert st.utilized_capacity == 1                    # one weight per PE at a time
    assert st.reads >= st.fills * rf_loops              # each fill serves every RF iteration
    assert all(d not in dw for d, b in reg.temporal if b > 1)
    for d, b, axis in mp.levels[1].spatial:             # columns: W & O dims; rows: reduction
        assert b == 1 or (d in dw & do if axis == "X" else d in dw - do)


def test_constrained_network_ops_obey_their_dataflow(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path) -> None:
    monkeypatch.setattr(schedule, "EINSUM_EVALUATIONS", 4096)
    schedule.clear_einsum_memo()
    acc = archsim.load("eyeriss_like")
    wl, _ = archsim.api.with_native_formats(acc, archsim.workload("resnet18"))
    c = tmp_path / "c.yaml"
    c.write_text("rules:\n  - {ops: '*', dataflow: [ws]}\n")
    res = archsim.evaluate(acc, wl, objective="energy", mapping="search", constraints=str(c))
    mats = [r for r in res.ops if wl.op(r.name).is_matrix]
    assert mats and all(r.dataflow == "ws" for r in mats)
    # the Einsum nest (under ws) wins the energy objective for some layers
    assert any(r.mapping.startswith("nest7d") for r in mats)
    schedule.clear_einsum_memo()


def test_lower_bound_holds_for_searched_gemm_nests() -> None:
    unit = _unit()
    op = Gemm(name="fc", m=1, n=1000, k=512, a_format=I16, w_format=I16)
    prob, hier = problem_and_hierarchy(unit, op)
    # GEMV: weights 512,000 words read once from DRAM at its shared read/write rate
    words_per_cycle = hier.levels[-1].read_bw
    assert lower_bound_cycles(prob, hier) == math.ceil((512 + 512_000 + 1000) / words_per_cycle)
    r = search(prob, hier, objective="latency", time_budget_s=float("inf"),
               max_evaluations=8192, seed=0)
    assert r.result.cycles >= lower_bound_cycles(prob, hier)


def test_search_reports_progress() -> None:
    """A search reports after each batch: candidates of a fixed count, or whole seconds of a
    time budget (the command line draws a bar from it once the search takes over 2 s)."""
    unit = _unit()
    prob, hier = problem_and_hierarchy(unit, Gemm(name="g", m=32, n=32, k=32,
                                                  a_format=I16, w_format=I16))
    seen: list[tuple[int, int]] = []
    search(prob, hier, objective="edp", time_budget_s=float("inf"), max_evaluations=8192,
           batch_size=4096, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(4096, 8192), (8192, 8192)]
    timed: list[tuple[int, int]] = []
    search(prob, hier, objective="edp", time_budget_s=1.0,
           progress=lambda d, t: timed.append((d, t)))
    assert timed and all(t == 1 and 0 <= d <= 1 for d, t in timed)


def test_int8_weights_beside_int16_activations_on_the_array() -> None:
    """The spatial array's Einsum view: weights in int8, inputs and outputs in int16; DRAM
    bytes are each operand's elements times its own bytes, register accesses in 16-bit
    words (a weight is half of one)."""
    unit = _unit()
    op = Gemm(name="g", m=64, n=96, k=128, a_format=I16, w_format=FORMATS["int8"])
    prob, hier = problem_and_hierarchy(unit, op)
    assert {ds.name: ds.word_bits for ds in prob.data_spaces} == {"A": 16, "B": 8, "Z": 16}
    assert all(lv.word_bits == 16 for lv in hier.levels)
    nm = search(prob, hier, objective="energy", time_budget_s=float("inf"),
                max_evaluations=4096, seed=0).mapping
    res = analyse(prob, hier, nm)
    e = unit.estimate(op, unit.parse_mapping(nm))
    dram = res.stats["dram"]
    assert e.dram_read_bytes == pytest.approx(
        2 * dram["A"].reads + 1 * dram["B"].reads + 2 * dram["Z"].reads)
    reg = res.stats["pe_reg"]
    reg_reads = sum(s.reads * s.instances * (0.5 if d == "B" else 1.0) for d, s in reg.items())
    assert e.actions[(unit.cname("pe_reg"), "read")] == pytest.approx(reg_reads)
    assert dram["B"].reads >= 96 * 128               # every weight at least once
