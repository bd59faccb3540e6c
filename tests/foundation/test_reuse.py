"""Reuse of identical work in a network evaluation (issue 30, item 3): each distinct
(op signature, unit, mapping, constraints) is priced once, and the result is the same bit for
bit as pricing every op (``evaluate(..., reuse=False)``)."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

import archsim
from archsim import parallel
from archsim.mapper import schedule
from archsim.mapper.constraints import parse_constraints
from archsim.mapper.schedule import op_signature
from archsim.parallel import evaluate_plan
from archsim.plans import load_cluster_for
from archsim.serve import (
    LengthDist,
    PoolSpec,
    SchedulerSpec,
    ServeSetup,
    parse_slo,
    serve,
    synthesize,
)
from archsim.serve import cost as serve_cost
from archsim.workloads.formats import get_format
from archsim.workloads.graph import Workload
from archsim.workloads.ops import Gemm, Sparsity
from archsim.workloads.parallel import ParallelPlan

#: rules by op name (layer1.* only) and by kind: ops of one shape get different constraints
CONSTRAINTS = """\
rules:
  - kind: conv2d
    dataflow: [ws, os]
  - ops: "layer1.*"
    kind: conv2d
    dataflow: os
"""

# (design, workload kwargs, evaluate kwargs): families GPU, LUT, PIM, FPGA, spatial, a
# two-unit design; phases prefill, decode, train, inference; TP; search; constraints.
CASES = [
    ("h100", dict(model="llama2-7b", phase="prefill", seq=256, tp=2), {}),
    ("h100", dict(model="llama3-8b", phase="decode", context=512, attention="fused"), {}),
    ("a100", dict(model="gpt2-small", phase="train", batch=2, seq=128), {}),
    ("a100_lut4x", dict(model="llama2-7b", phase="decode", context=256, w_format="int2"), {}),
    ("hbm_pim_like", dict(model="gpt2-small", phase="decode", context=128), {}),
    ("sat_vcu1525", dict(model="resnet18", phase="inference"), {}),
    ("tpu_like", dict(model="gpt2-small", phase="prefill", seq=64), {}),
    ("eyeriss_like", dict(model="resnet18", phase="inference"), {}),
    ("eyeriss_like", dict(model="resnet18", phase="inference"),
     dict(mapping="search")),
    ("eyeriss_like", dict(model="resnet18", phase="inference"),
     dict(constraints="rules")),
    ("nvdla_shidiannao", dict(model="resnet18", phase="inference"),
     dict(objective="energy")),
]


def _workload(acc: archsim.Accelerator, kw: dict) -> Workload:
    kw = dict(kw)
    w_format = kw.pop("w_format", None)
    wl = archsim.workload(**kw)
    if w_format:
        return wl.with_formats(None, get_format(w_format))
    return archsim.api.with_native_formats(acc, wl)[0]     # what ``archsim run`` does


@pytest.mark.parametrize("design,wkw,ekw", CASES,
                         ids=[f"{d}-{w['model']}-{w['phase']}-{'-'.join(e.values()) or 'default'}"
                              for d, w, e in CASES])
def test_reuse_is_bit_identical(design: str, wkw: dict, ekw: dict,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Memoised == unmemoised: every field of the result (per-op rows with their names and
    tags, cycles, energy and area breakdowns, extra) and its JSON text, which writes every
    float exactly (``repr``)."""
    monkeypatch.setattr(schedule, "EINSUM_EVALUATIONS", 8192)     # a small, seeded search
    if "constraints" in ekw:
        ekw = {**ekw, "constraints": parse_constraints(CONSTRAINTS, "c.yaml")}
    acc = archsim.load(design)
    wl = _workload(acc, wkw)
    fresh = archsim.evaluate(acc, wl, reuse=False, **ekw)
    reused = archsim.evaluate(acc, wl, reuse=True, **ekw)
    assert reused == fresh
    assert reused.to_json() == fresh.to_json()
    assert [(r.name, r.layer, r.block, r.role) for r in reused.ops] == \
        [(op.name, op.layer, op.block, op.role) for op in wl.ops()]


def test_each_distinct_signature_is_priced_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """One unit, default mapping: one ``estimate`` per op without reuse, one per distinct
    signature with it (counted here from the ops themselves). Llama-2-7B decode repeats one
    block 32 times, so the distinct signatures are far fewer than the ops."""
    acc = archsim.load("h100")
    wl = archsim.workload("llama2-7b", phase="decode", context=256, attention="fused")
    unit = acc.units[0]
    calls: list[str] = []
    real = type(unit).estimate

    def counting(self, op, mapping=None):  # type: ignore[no-untyped-def]
        calls.append(op.name)
        return real(self, op, mapping)

    monkeypatch.setattr(type(unit), "estimate", counting)
    ops = wl.ops()
    distinct = {op_signature(op) for op in ops}
    archsim.evaluate(acc, wl, reuse=False)
    assert len(calls) == len(ops)
    calls.clear()
    archsim.evaluate(acc, wl, reuse=True)
    assert len(calls) == len(distinct)
    per_block = {op_signature(op) for op in ops if op.block == 0}
    outside = {op_signature(op) for op in ops if op.block is None}
    assert len(distinct) <= len(per_block) + len(outside) < len(ops) / 10


def test_signature_ignores_labels_keeps_cost_fields() -> None:
    """Name, layer and block are labels; shape, format, pass, role and sparsity change cost."""
    fp16 = get_format("fp16")
    g = Gemm(name="blocks.0.q", m=8, n=64, k=32, a_format=fp16, w_format=fp16,
             layer="blocks.0", block=0, role="qkv")
    assert op_signature(replace(g, name="blocks.7.q", layer="blocks.7", block=7)) == \
        op_signature(g)
    for changed in (replace(g, m=9), replace(g, a_format=get_format("bf16")),
                    replace(g, role="ffn_up"), replace(g, pass_="bwd_data"),
                    replace(g, batch=2)):
        assert op_signature(changed) != op_signature(g)
    assert op_signature(replace(g, w_sparsity=Sparsity(2, 4))) != op_signature(g)


def test_cycle_fidelity_simulates_each_distinct_op_once(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Two identical GEMMs under different names and one other: at cycle fidelity two
    simulations with reuse (three without), the same result bit for bit."""
    acc = archsim.load("a100_lut4x")
    fp16, int2 = get_format("fp16"), get_format("int2")
    wl = Workload(name="three_gemms")
    a = wl.add(Gemm(name="blocks.0.up", m=64, n=256, k=256, a_format=fp16, w_format=int2))
    b = wl.add(Gemm(name="blocks.1.up", m=64, n=256, k=256, a_format=fp16, w_format=int2), after=[a])
    wl.add(Gemm(name="head", m=64, n=512, k=256, a_format=fp16, w_format=int2), after=[b])
    unit = acc.units[0]
    calls: list[str] = []
    real = type(unit).simulate

    def counting(self, op, mapping=None):  # type: ignore[no-untyped-def]
        calls.append(op.name)
        return real(self, op, mapping)

    monkeypatch.setattr(type(unit), "simulate", counting)
    fresh = archsim.evaluate(acc, wl, fidelity="cycle", reuse=False)
    assert calls == ["blocks.0.up", "blocks.1.up", "head"]
    calls.clear()
    reused = archsim.evaluate(acc, wl, fidelity="cycle", reuse=True)
    assert calls == ["blocks.0.up", "head"]
    assert reused == fresh and reused.to_json() == fresh.to_json()
    assert reused.ops[0].cycles == reused.ops[1].cycles


def _no_reuse(monkeypatch: pytest.MonkeyPatch, module: object) -> None:
    """``module``'s ``evaluate`` prices every op (``reuse=False``)."""
    monkeypatch.setattr(module, "evaluate", functools.partial(archsim.evaluate, reuse=False))


def test_plans_are_identical_with_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan (``archsim.parallel.evaluate_plan``: TP x PP training of Llama-2-7B) prices
    its graphs with ``evaluate``: the same plan result with and without reuse."""
    cluster = load_cluster_for("h100", 8)
    plan = ParallelPlan(tp=2, pp=2, microbatches=4)
    reused = evaluate_plan(cluster, "llama2-7b", plan, "train", 8, 1024)
    _no_reuse(monkeypatch, parallel)
    fresh = evaluate_plan(cluster, "llama2-7b", plan, "train", 8, 1024)
    assert reused == fresh


def test_serving_is_identical_with_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    """A serving simulation (``archsim.serve``: 60 requests of Llama-2-7B on one H100) prices
    each iteration's groups with ``evaluate``: the same report with and without reuse."""
    acc = archsim.load("h100")
    reqs = synthesize(4.0, 15.0, LengthDist("lognormal", 100.0, 0.8, 1000),
                      LengthDist("lognormal", 60.0, 0.5, 400), seed=0, max_requests=60)
    setup = ServeSetup("llama2-7b", PoolSpec(1, 1, SchedulerSpec("sarathi", chunk=256)))
    slo = parse_slo("ttft=2s,tpot=100ms")
    reused = serve(acc, setup, reqs, slo)
    _no_reuse(monkeypatch, serve_cost)
    fresh = serve(acc, setup, reqs, slo)
    assert reused == fresh
