"""Whole-network list scheduling on heterogeneous designs (mapper/hetero.py)."""

from __future__ import annotations

import copy

import pytest

import archsim
from archsim.arch import load_data
from archsim.mapper import map_workload
from archsim.mapper.hetero import Link, Option, list_schedule, retime
from archsim.workloads.graph import Workload
from archsim.workloads.ops import Gemm
from tests.conftest import spatial_config

HETERO = "configs/hetero/nvdla_shidiannao.yaml"


def two_unit_config(**kw) -> dict:
    """Two identical small arrays ``a0`` and ``a1`` (shared memory)."""
    cfg = spatial_config(**kw)
    u = cfg["units"][0]
    cfg["units"] = [dict(u, name="a0"), dict(u, name="a1")]
    return cfg


def fork_join() -> Workload:
    """a -> (b1, b2) -> c: b1 and b2 are independent."""
    w = Workload("forkjoin")
    a = w.add(Gemm(name="a", m=32, n=32, k=32))
    b1 = w.add(Gemm(name="b1", m=32, n=64, k=32), [a])
    b2 = w.add(Gemm(name="b2", m=32, n=64, k=32), [a])
    w.add(Gemm(name="c", m=32, n=32, k=64), [b1, b2])
    return w


def test_hand_worked_heft_example():
    """Ops a, b, c, d (a -> b, a -> c, b -> d, c -> d) on unit 0 (fast) and unit 1 (slow).

    Durations (s): a 1|1, b 4|6, c 4|6, d 1|1. Best single unit: 1 + 4 + 4 + 1 = 10.
    EFT by hand: a -> u0 (ends 1; tie broken by option order); b -> u0 (ends 5 < 7);
    c -> u1 (u0 would end 9, u1 ends 1 + 6 = 7); d: u0 starts at max(5, 7) = 7 and ends 8,
    u1 also ends 8 -> u0 (tie). Makespan 8.
    """
    opts = [[Option(0, 1, 0), Option(1, 1, 0)], [Option(0, 4, 0), Option(1, 6, 0)],
            [Option(0, 4, 0), Option(1, 6, 0)], [Option(0, 1, 0), Option(1, 1, 0)]]
    edges = [(0, 1, 8.0), (0, 2, 8.0), (1, 3, 8.0), (2, 3, 8.0)]
    p = list_schedule(list("abcd"), opts, edges, "latency", Link(), 2)
    assert p.makespan_s == 8.0
    assert [opts[i][c].unit for i, c in enumerate(p.choice)] == [0, 0, 1, 0]
    assert p.start_s == (0.0, 1.0, 1.0, 7.0)


def test_link_transfer_cost_and_serial_link():
    """Same example with a 1 GB/s link and 0.5 s latency; edges of 1e9 bytes cost 1.5 s.

    By hand: a -> u0 (ends 1). b: u0 ends 5; u1 would wait for a's copy (1 -> 2.5) and end
    8.5 -> u0. c: u0 ends 9; u1 copy 1 -> 2.5, runs 2.5 -> 8.5 -> u1. d: on u0 it needs c's
    copy 8.5 -> 10 and ends 11; on u1 it needs b's copy (5 -> 6.5, the link is free after
    2.5) and c is local (8.5): starts 8.5, ends 9.5 -> u1. Makespan 9.5 < 10 (all on u0),
    two transfers: a->c and b->d (c->d stays on u1).
    """
    opts = [[Option(0, 1, 0), Option(1, 1, 0)], [Option(0, 4, 0), Option(1, 6, 0)],
            [Option(0, 4, 0), Option(1, 6, 0)], [Option(0, 1, 0), Option(1, 1, 0)]]
    edges = [(0, 1, 1e9), (0, 2, 1e9), (1, 3, 1e9), (2, 3, 1e9)]
    p = list_schedule(list("abcd"), opts, edges, "latency", Link(1.0, 0.5), 2)
    assert p.makespan_s == 9.5
    assert [opts[i][c].unit for i, c in enumerate(p.choice)] == [0, 0, 1, 1]
    assert sorted((t.src, t.dst, t.start_s, t.end_s) for t in p.transfers) == [
        ("a", "c", 1.0, 2.5), ("b", "d", 5.0, 6.5)]
    # forced cross-unit chain: a on u0, b on u1; transfer 0.5 + 2e9 / 1e9 = 2.5 s
    p2 = list_schedule(["a", "b"], [[Option(0, 1, 0)], [Option(1, 2, 0)]], [(0, 1, 2e9)],
                       "latency", Link(1.0, 0.5), 2)
    assert p2.makespan_s == 1 + 2.5 + 2
    (t,) = p2.transfers
    assert (t.start_s, t.end_s, t.nbytes) == (1.0, 3.5, 2e9)


def test_single_unit_schedule_is_back_to_back_sum():
    """One unit: latency is exactly the sum of the per-op latencies (today's golden values)."""
    for cfg, model, kw in (("eyeriss_like", "resnet18", {}),
                           ("tpu_like", "gpt2-small", {"phase": "prefill", "seq": 32})):
        wl = archsim.workload(model, a_format="int8", w_format="int8", **kw)
        acc = archsim.load(cfg)
        res = archsim.evaluate(acc, wl)
        total = 0.0
        for o in res.ops:
            total += o.latency_s
        assert res.latency_s == total
        sched = map_workload(acc, wl)
        assert sched.start_s[0] == 0.0
        assert all(sched.start_s[i + 1] == sched.end_s[i] for i in range(len(sched.end_s) - 1))


def test_independent_branches_overlap():
    """Fork-join on two identical units: b1 || b2, so makespan = d(a) + d(b) + d(c)
    (instead of d(a) + 2 d(b) + d(c) back to back)."""
    acc = load_data(two_unit_config(rows=4, cols=4, bandwidth_gbps=1e3))
    wl = fork_join()
    sched = map_workload(acc, wl)
    d = {a.op.name: a.estimate.latency_s for a in sched.assignments}
    units = {a.op.name: a.unit.name for a in sched.assignments}
    assert units["b1"] != units["b2"]
    assert sched.latency_s == pytest.approx(d["a"] + d["b1"] + d["c"], rel=1e-12)
    assert sched.latency_s < sum(d.values())
    res = archsim.evaluate(acc, wl)
    assert res.latency_s == pytest.approx(sched.latency_s, rel=1e-12)
    assert res.extra["schedule"]["sequential_s"] == pytest.approx(sum(d.values()), rel=1e-12)


def _single_unit(acc_raw: dict, i: int):
    raw = copy.deepcopy(acc_raw)
    raw["units"] = [raw["units"][i]]
    return load_data(raw)


@pytest.mark.parametrize("model,kw", [("resnet18", {}), ("gpt2-small",
                                                           {"phase": "prefill", "seq": 32})])
@pytest.mark.parametrize("mode", ["default", pytest.param("search", marks=pytest.mark.slow)])
def test_hetero_never_worse_than_best_unit_alone(model, kw, mode):
    acc = archsim.load(HETERO)
    wl = archsim.workload(model, a_format="int8", w_format="int8", **kw)
    het = archsim.evaluate(acc, wl, mapping=mode).latency_s
    alone = [archsim.evaluate(_single_unit(acc.raw, i), wl, mapping=mode).latency_s
             for i in range(len(acc.units))]
    assert het <= min(alone) * (1 + 1e-12)


def test_hetero_resnet_uses_both_units_and_overlaps():
    """ResNet's downsample convs run beside the main path on the second unit."""
    acc = archsim.load(HETERO)
    res = archsim.evaluate(acc, archsim.workload("resnet18", a_format="int8", w_format="int8"))
    s = res.extra["schedule"]
    assert set(s["busy_s"]) == {"nvdla", "shidiannao"}
    assert res.latency_s < s["sequential_s"]
    # a unit is one resource: the makespan is at least each unit's busy time
    assert all(res.latency_s >= b * (1 - 1e-12) for b in s["busy_s"].values())


def test_link_copies_add_dram_traffic_and_energy():
    """Pin a -> b on different units (constraints) over a copying link: the result's DRAM
    bytes grow by 2 x the tensor (read on the producer's side, write on the consumer's)."""
    from archsim.mapper.constraints import parse_constraints

    acc = load_data(two_unit_config(rows=4, cols=4, bandwidth_gbps=10.0))
    w = Workload("chain")
    a = w.add(Gemm(name="a", m=32, n=32, k=32))
    w.add(Gemm(name="b", m=32, n=32, k=32), [a])
    cons = parse_constraints("rules:\n  - ops: a\n    unit: a0\n  - ops: b\n    unit: a1\n")
    shared = map_workload(acc, w, constraints=cons)
    link = Link(bandwidth_gbps=2.0, latency_s=1e-6)
    copied = map_workload(acc, w, constraints=cons, link=link)
    nbytes = a.output_bytes()
    assert copied.latency_s == pytest.approx(shared.latency_s + 1e-6 + nbytes / 2e9, rel=1e-12)
    (t,) = copied.transfers
    assert t.nbytes == nbytes and (t.src, t.dst) == ("a", "b")
    # evaluate() takes the link from the design's interconnect key
    raw = {k: v for k, v in acc.raw.items() if k != "interconnect"}
    acc_copy = load_data({**raw, "interconnect": {
        "shared_memory": False, "bandwidth_gbps": 2.0, "latency_ns": 1000.0}})
    r_copy = archsim.evaluate(acc_copy, w, constraints=cons)
    r_shared = archsim.evaluate(acc, w, constraints=cons)
    assert r_copy.dram_bytes - r_shared.dram_bytes == pytest.approx(2 * nbytes)
    assert r_copy.energy_breakdown_j["a0.dram"] > r_shared.energy_breakdown_j["a0.dram"]
    assert r_copy.latency_s == pytest.approx(copied.latency_s, rel=1e-12)


def test_retime_with_other_durations():
    """Re-timing keeps assignment and order: doubling every duration of a one-unit chain
    doubles the makespan."""
    opts = [[Option(0, 1.0, 0)], [Option(0, 2.0, 0)], [Option(0, 3.0, 0)]]
    edges = [(0, 1, 1.0), (1, 2, 1.0)]
    p = list_schedule(["x", "y", "z"], opts, edges)
    assert p.makespan_s == 6.0
    q = retime(p, ["x", "y", "z"], [0, 0, 0], [2.0, 4.0, 6.0], edges)
    assert q.makespan_s == 12.0 and q.start_s == (0.0, 2.0, 6.0)


@pytest.mark.parametrize("objective", ["energy", "edp"])
def test_energy_objectives_never_worse_than_single_unit(objective):
    """For energy and EDP, the plan's objective is at most each single-unit plan's."""
    opts = [[Option(0, 1, 5), Option(1, 2, 1)], [Option(0, 1, 5), Option(1, 3, 2)],
            [Option(0, 2, 1), Option(1, 1, 4)]]
    edges = [(0, 1, 1.0), (0, 2, 1.0)]
    p = list_schedule(["a", "b", "c"], opts, edges, objective, Link(), 2)
    e = sum(opts[i][c].energy_j for i, c in enumerate(p.choice))
    v = e if objective == "energy" else e * p.makespan_s
    for u in (0, 1):
        pu = list_schedule(["a", "b", "c"], [[o[u]] for o in opts], edges, "latency")
        eu = sum(o[u].energy_j for o in opts)
        vu = eu if objective == "energy" else eu * pu.makespan_s
        assert v <= vu
    if objective == "energy":   # per-op minimum energy: 1 + 2 + 1
        assert e == 4


def test_cycle_fidelity_single_unit_is_sum_of_simulated_ops():
    """At cycle fidelity the schedule is re-timed with simulated durations; one unit: the
    latency is the sum of the simulated op latencies."""
    acc = archsim.load("a100_lut4x")
    wl = archsim.gemm_workload(64, 1024, 1024, a_format="fp16", w_format="int2")
    res = archsim.evaluate(acc, wl, fidelity="cycle")
    assert res.latency_s == sum(o.latency_s for o in res.ops)
    assert res.ops[0].cycles == acc.units[0].simulate(wl.ops()[0], None)


def test_interconnect_key_is_validated():
    from archsim.workloads.errors import ConfigError

    raw = two_unit_config(rows=4, cols=4, bandwidth_gbps=10.0)
    with pytest.raises(ConfigError, match=r"interconnect\.bandwidth_gbps: must be > 0"):
        load_data({**raw, "interconnect": {"shared_memory": False}})
    with pytest.raises(ConfigError, match=r"interconnect\.bogus"):
        load_data({**raw, "interconnect": {"bogus": 1}})
    acc = load_data({**raw, "interconnect": {"shared_memory": False, "bandwidth_gbps": 25}})
    assert acc.interconnect.bandwidth_gbps == 25.0
