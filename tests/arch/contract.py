"""The Unit contract (``arch/base.py``) as a checker that any unit can be run through.

``contract_problems(unit, op)`` returns one line per broken clause; an empty list means
the unit keeps the contract for that op. ``tests/arch/test_unit_contract.py`` runs it over
every registered family x every reference config x :func:`ops_for`, and over deliberately
broken toy units (which it must catch). A new family's author can run it on their unit.
"""

from __future__ import annotations

import math
from typing import Any

from archsim import energy
from archsim.arch.base import Estimate, Unit
from archsim.workloads.errors import MappingError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import (
    AllReduce,
    Attention,
    Conv2d,
    Elementwise,
    Embedding,
    FusedMoE,
    Gemm,
    Norm,
    Op,
    Softmax,
)

#: Formats tried for each unit, first supported pair wins (activation, weight).
FORMAT_PAIRS = (("fp16", "fp16"), ("bf16", "bf16"), ("int8", "int8"), ("int16", "int16"))


def ops_for(unit: Unit) -> list[Op]:
    """A fixed set of ops in the first format pair the unit supports: GEMM, GEMV,
    attention GEMM (shared B), strided convolution, softmax of scores, norm, element-wise,
    embedding gather, a fused attention and a fused MoE layer (each refused with a reason by
    units without the kernel), and a low-bit weight GEMM when the unit takes int4 weights."""
    probe = Gemm(name="probe", m=8, n=8, k=8)
    a, w = next(((FORMATS[x], FORMATS[y]) for x, y in FORMAT_PAIRS
                 if unit.supports(Gemm(name="p", m=8, n=8, k=8, a_format=FORMATS[x],
                                       w_format=FORMATS[y])) is None),
                (probe.a_format, probe.w_format))
    f = {"a_format": a}
    ops: list[Op] = [
        Gemm(name="gemm", m=96, n=256, k=320, w_format=w, **f),
        Gemm(name="gemv", m=1, n=1024, k=768, w_format=w, **f),
        Gemm(name="attn.qk", m=16, n=128, k=64, batch=8, b_is_weight=False, b_shared=2,
             role="qk", w_format=a, **f),
        Conv2d(name="conv", n=2, c=16, h=14, w=14, k=32, r=3, s=3, stride=2, padding=1,
               w_format=w, **f),
        Softmax(name="attn.softmax", rows=128, cols=128, role="attn", **f),
        Norm(name="norm", rows=64, cols=768, norm="rmsnorm", **f),
        Elementwise(name="add", rows=64, cols=768, fn="add", inputs=2, **f),
        Embedding(name="embed", tokens=64, dim=256, vocab=1000, **f),
        Attention(name="attn.core", batch=2, heads=8, kv_heads=2, q_len=64, kv_len=256,
                  head_dim=64, causal=True, **f),
        FusedMoE(name="moe.experts", tokens=48, hidden=512, width=256, experts=16, top_k=2,
                 routing="power_law:1.2", w_format=w, **f),
    ]
    int4 = Gemm(name="gemm_w4", m=16, n=512, k=512, w_format=FORMATS["int4"], **f)
    if unit.supports(int4) is None:
        ops.append(int4)
    return ops


def _roofline_ok(unit: Unit, op: Op, mapping: Any, est: Estimate) -> str | None:
    bound = unit.roofline_cycles(op, mapping)
    # cycles are integers (ceil); allow the rounding only
    if est.cycles < math.floor(bound * (1 - 1e-9)):
        return (f"{op.name} ({mapping}): estimate {est.cycles} cycles beats the roofline "
                f"bound {bound:.1f}")
    return None


def contract_problems(unit: Unit, op: Op) -> list[str]:
    """Broken clauses of the Unit contract for ``op`` on ``unit`` (empty: kept)."""
    out: list[str] = []
    why = unit.supports(op)
    first = unit.estimate(op)
    if why:
        if first.feasible or first.reason != why:
            out.append(f"{op.name}: supports() says {why!r} but estimate is "
                       f"{'feasible' if first.feasible else repr(first.reason)}")
        return out
    comps = unit.components()
    names = {c.name for c in comps}
    space = unit.mapping_space(op)
    if not space or space[0] != unit.parse_mapping(None):
        out.append(f"{op.name}: mapping_space must start with the default mapping")
    feasible = 0
    for m in space:
        if unit.parse_mapping(m) != m:
            out.append(f"{op.name}: parse_mapping does not round-trip {m!r}")
        est = unit.estimate(op, m)
        if est != unit.estimate(op, m):
            out.append(f"{op.name} ({m}): estimate is not deterministic")
        if not est.feasible:
            if not est.reason:
                out.append(f"{op.name} ({m}): infeasible without a reason")
            continue
        feasible += 1
        if p := _roofline_ok(unit, op, m, est):
            out.append(p)
        if not (isinstance(est.cycles, int) and est.cycles > 0):
            out.append(f"{op.name} ({m}): cycles {est.cycles!r} is not a positive int")
        bad = sorted({c for c, _ in est.actions} - names)
        if bad:
            out.append(f"{op.name} ({m}): actions on unknown components {bad}")
        if any(not (math.isfinite(v) and v >= 0) for v in est.actions.values()):
            out.append(f"{op.name} ({m}): a negative or non-finite action count")
        if bad:
            continue
        rep = energy.evaluate(comps, est.actions, est.latency_s,
                              energy.Technology(node_nm=unit.node_nm))
        if not (rep.total_j > 0 and math.isfinite(rep.total_j)):
            out.append(f"{op.name} ({m}): energy {rep.total_j!r} J is not positive")
    if feasible == 0:
        out.append(f"{op.name}: no mapping of its mapping space is feasible")
    return out


def design_problems(unit: Unit) -> list[str]:
    """Contract clauses that do not depend on an op: area, bad mappings."""
    out: list[str] = []
    ar = energy.area(unit.components(), energy.Technology(node_nm=unit.node_nm))
    if not (ar.total_mm2 > 0 or "resources" in unit.report()):
        out.append(f"area {ar.total_mm2} mm2 and no resource report")
    probe = Attention(name="probe", batch=1, heads=1, kv_heads=1, q_len=1, kv_len=8,
                      head_dim=64)
    if unit.fused_attention() and unit.supports(probe):
        out.append(f"fused_attention() is True but the Attention op is refused: "
                   f"{unit.supports(probe)}")
    for bad in ("no_such_dataflow", {"no_such_key": 1}, 3.5, ["ws"]):
        try:
            unit.parse_mapping(bad)
        except MappingError:
            continue
        out.append(f"parse_mapping({bad!r}) did not raise MappingError")
    return out


def unsupported_op() -> Op:
    """An op no single device runs: an all-reduce over 8 devices (units with a link may
    support it)."""
    return AllReduce(name="allreduce", elements=1 << 20, devices=8)
