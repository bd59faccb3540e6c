"""Serving simulation: closed forms, conservation properties, determinism, bad input.

Expected values are worked out independently of the simulator: full-model
``archsim.evaluate`` of the zoo's prefill and decode workloads (not the serving cost
model's sub-workloads), the KV link formula, Little's law and counting identities.
"""

from __future__ import annotations

import pytest

import archsim
from archsim.serve import (
    LengthDist,
    PoolSpec,
    SchedulerSpec,
    ServeSetup,
    parse_slo,
    serve,
    synthesize,
)
from archsim.serve.cluster import LINKS
from archsim.serve.requests import Request
from tests.serve.conftest import MODEL, full_latency


def test_one_request_is_prefill_plus_decodes(a100, costs):
    # One request alone: TTFT = full-model prefill latency of its prompt; every later token
    # is one decode step of batch 1 over the growing cache (context P, P+1, ...).
    p, o = 512, 6
    res_raw: dict = {}
    res = serve(a100, ServeSetup(MODEL), [Request(0, 0.0, p, o)], costs=costs,
                raw_out=res_raw)
    prefill = full_latency(a100, "prefill", seq=p)
    decodes = [full_latency(a100, "decode", batch=1, context=p + g - 1) for g in range(1, o)]
    assert res.ttft_s["p50"] == pytest.approx(prefill, rel=0.01)
    assert res.e2e_s["p50"] == pytest.approx(prefill + sum(decodes), rel=0.01)
    assert res.tpot_s["p50"] == pytest.approx(sum(decodes) / (o - 1), rel=0.01)
    assert res.finished == 1 and res.preemptions == 0


def test_disaggregated_one_request_adds_the_kv_transfer(a100, costs):
    # Prefill on one replica, KV (prompt x 2 x layers x kv_heads x head_dim x 2 bytes)
    # over NVLink 3 (300 GB/s one way, 5 us), then decodes on the other replica.
    p, o = 512, 4
    link = LINKS["nvlink3"]
    setup = ServeSetup(MODEL, PoolSpec(1, 1), PoolSpec(1, 1), link=link)
    res = serve(a100, setup, [Request(0, 0.0, p, o)], costs=costs)
    kv_bytes = p * 2 * 32 * 32 * 128 * 2
    xfer = link.latency_s + kv_bytes / 300e9
    prefill = full_latency(a100, "prefill", seq=p)
    decodes = sum(full_latency(a100, "decode", batch=1, context=p + g - 1) for g in range(1, o))
    assert res.ttft_s["p50"] == pytest.approx(prefill, rel=0.01)
    assert res.kv_transfer["mean_s"] == pytest.approx(xfer, rel=1e-9)
    assert res.e2e_s["p50"] == pytest.approx(prefill + xfer + decodes, rel=0.01)
    assert res.devices == 2


def _reqs(rate: float, dur: float, seed: int = 3) -> list[Request]:
    return synthesize(rate, dur, LengthDist("uniform", 64, 512), LengthDist("uniform", 8, 64),
                      seed=seed)


@pytest.mark.parametrize("policy", ["vllm", "orca", "sarathi"])
def test_littles_law_and_throughput_on_a_stable_run(a100, costs, policy):
    reqs = _reqs(4.0, 20.0)
    setup = ServeSetup(MODEL, PoolSpec(1, 1, SchedulerSpec(policy, chunk=256)))
    raw: dict = {}
    res = serve(a100, setup, reqs, costs=costs, raw_out=raw)
    # L (time-average of the simulator's in-system counter) = lambda x W
    lam = len(reqs) / raw["end_s"]
    assert res.mean_in_system == pytest.approx(lam * res.e2e_s["mean"], rel=1e-6)
    # stable: everything offered is served, at the offered rate (within the window edge)
    offered = len(reqs) / reqs[-1].arrival_s
    assert res.requests_per_s == pytest.approx(offered, rel=0.15)


def _tight(a100, costs, tokens: int) -> float:
    """Memory fraction that leaves room for ``tokens`` KV tokens next to the weights."""
    c = costs[1]
    return (c.weight_bytes() + tokens * c.kv_bytes_per_token) / c.capacity_bytes()


@pytest.mark.parametrize("policy,preempt", [("vllm", "recompute"), ("vllm", "swap"),
                                            ("sarathi", "recompute"), ("orca", "recompute")])
def test_no_request_lost_or_served_twice_and_kv_bounded(a100, costs, policy, preempt):
    reqs = _reqs(20.0, 5.0, seed=7)
    frac = _tight(a100, costs, 3000)
    setup = ServeSetup(MODEL, PoolSpec(1, 1, SchedulerSpec(policy, chunk=256,
                                                           preemption=preempt)),
                       memory_fraction=frac)
    raw: dict = {}
    res = serve(a100, setup, reqs, costs=costs, raw_out=raw)
    states = raw["states"]
    assert res.finished == len(reqs) and res.rejected == 0
    assert sorted(s.req.rid for s in states) == list(range(len(reqs)))
    assert all(s.served == 1 for s in states)                 # finished exactly once
    assert all(s.g == s.output for s in states)               # every token generated once
    rep = raw["sim"].replicas[0]
    assert rep.kv.used == 0                                   # all blocks returned
    assert rep.kv.peak <= rep.kv.total
    assert max(x[5] for x in raw["timeline"]) <= rep.kv.total
    if policy != "orca":                                      # the cache really was full
        assert res.preemptions > 0
    else:                                                     # Orca reserves: never preempts
        assert res.preemptions == 0


def test_same_seed_same_result_and_other_seed_differs(a100, costs):
    setup = ServeSetup(MODEL, PoolSpec(2, 1, SchedulerSpec("sarathi")), router="kv-aware")
    slo = parse_slo("ttft=500ms,tpot=50ms")
    a = serve(a100, setup, _reqs(6.0, 8.0, seed=11), slo, seed=11, costs=costs).to_dict()
    b = serve(a100, setup, _reqs(6.0, 8.0, seed=11), slo, seed=11, costs=costs).to_dict()
    c = serve(a100, setup, _reqs(6.0, 8.0, seed=12), slo, seed=12, costs=costs).to_dict()
    a.pop("evaluations"), b.pop("evaluations"), c.pop("evaluations")
    assert a == b
    assert a["e2e_s"] != c["e2e_s"]


def test_round_robin_spreads_requests_evenly(a100, costs):
    setup = ServeSetup(MODEL, PoolSpec(3, 1), router="round-robin")
    reqs = [Request(i, i * 0.01, 32, 4) for i in range(9)]
    raw: dict = {}
    serve(a100, setup, reqs, costs=costs, raw_out=raw)
    counts = [sum(1 for s in raw["states"] if s.replica == r) for r in range(3)]
    assert counts == [3, 3, 3]


def test_sarathi_chunks_a_long_prompt(a100, costs):
    # chunk 256 over a 1024-token prompt: TTFT = 4 chunk iterations (no other requests);
    # each chunk's dense part equals a 256-token prefill's, so TTFT exceeds one prefill of
    # 1024 tokens by the re-read weights (3 extra passes) but is below 4x it.
    setup = ServeSetup(MODEL, PoolSpec(1, 1, SchedulerSpec("sarathi", chunk=256)))
    res = serve(a100, setup, [Request(0, 0.0, 1024, 2)], costs=costs)
    one = full_latency(a100, "prefill", seq=1024)
    assert one < res.ttft_s["p50"] < 4 * one
    iters = [r["iterations"] for r in res.replicas][0]
    assert iters == 4 + 1                                    # 4 chunks, 1 decode


@pytest.mark.parametrize("order", ["fcfs", "priority"])
def test_priority_order_serves_the_urgent_request_first(a100, costs, order):
    # request 0 occupies the only slot (max_num_seqs 1); 1 (priority 5) and 2 (priority 0)
    # arrive while it runs: FCFS serves 1 then 2, priority serves 2 then 1.
    reqs = [Request(0, 0.0, 256, 4), Request(1, 0.001, 64, 2, priority=5),
            Request(2, 0.002, 64, 2, priority=0)]
    setup = ServeSetup(MODEL, PoolSpec(1, 1, SchedulerSpec("vllm", max_num_seqs=1,
                                                           order=order)))
    raw: dict = {}
    serve(a100, setup, reqs, costs=costs, raw_out=raw)
    first = {s.req.rid: s.first_t for s in raw["states"]}
    assert (first[1] < first[2]) == (order == "fcfs")


def test_attacc_like_gpu_plus_pim_serves_with_decode_attention_on_pim():
    # multi-unit design through the existing mapper: decode attention pinned to the PIM unit
    from tests.conftest import ROOT

    acc = archsim.load(ROOT / "examples" / "serving" / "attacc_like.yaml")
    cons = ROOT / "examples" / "serving" / "attacc_like.constraints.yaml"
    setup = ServeSetup(MODEL, PoolSpec(1, 1, SchedulerSpec("sarathi")), decode_constraints=cons)
    reqs = [Request(i, 0.05 * i, 128, 8) for i in range(6)]
    raw: dict = {}
    res = serve(acc, setup, reqs, raw_out=raw)
    assert res.finished == 6 and all(s.served == 1 for s in raw["states"])
    # the decode-attention sub-workload really ran on the PIM unit
    from archsim.mapper.constraints import load_constraints
    w = archsim.workload(MODEL, "decode", batch=4, context=128)
    r = archsim.evaluate(acc, w, constraints=load_constraints(cons))
    assert {o.unit for o in r.ops if o.name.endswith((".attn.qk", ".attn.av"))} == {"pim"}
