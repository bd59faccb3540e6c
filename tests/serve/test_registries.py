"""Scheduling policies and routers are registered classes: a new one is one class plus one
registration line, and the simulator runs it without any other edit."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

import pytest

from archsim.serve import PoolSpec, SchedulerSpec, ServeSetup, serve
from archsim.serve.policy import POLICIES, Policy, register_policy
from archsim.serve.replica import Replica, State
from archsim.serve.requests import Request
from archsim.serve.router import ROUTERS, Router, register_router
from archsim.workloads.errors import WorkloadError
from tests.serve.conftest import MODEL


class OneAtATime(Policy):
    """Toy policy: one request at a time, its whole prompt, then its decodes to the end."""

    def batch(self, rep: Replica, swap_s: float
              ) -> tuple[list[tuple[State, int]], list[State], float]:
        if not rep.running and rep.waiting:
            s = rep.waiting[0][1]
            if rep.admit(s, reserve_output=True):
                heapq.heappop(rep.waiting)
                rep.running.append(s)
                return [(s, s.target - s.done)], [], swap_s
        dec, t = rep.decodes()
        return [], dec, swap_s + t


class LastReplica(Router):
    """Toy router: every request to the highest replica index."""

    def pick(self, pool: Sequence[Replica]) -> Replica:
        return pool[-1]


@pytest.fixture
def toys() -> Iterator[None]:
    register_policy("one-at-a-time")(OneAtATime)        # the one registration line each
    register_router("last")(LastReplica)
    yield
    del POLICIES["one-at-a-time"], ROUTERS["last"]




def test_a_toy_policy_and_router_run_by_name(toys, a100, costs):
    assert "one-at-a-time" in POLICIES and "last" in ROUTERS
    reqs = [Request(i, 0.001 * i, 64 + 16 * i, 4) for i in range(5)]
    setup = ServeSetup(MODEL, PoolSpec(2, 1, SchedulerSpec("one-at-a-time")), router="last")
    raw: dict = {}
    res = serve(a100, setup, reqs, costs=costs, raw_out=raw)
    assert res.finished == len(reqs) and res.preemptions == 0
    # the router sent everything to replica 1; the policy never batched two requests
    assert {s.replica for s in raw["states"]} == {1}
    # (each iteration prefills one prompt or decodes one request)
    assert all((prefill_tokens > 0) + decodes == 1
               for _rep, _t, _dt, prefill_tokens, decodes, *_ in raw["timeline"])
    # one at a time in arrival order: each request starts after the previous one finished
    order = sorted(raw["states"], key=lambda s: s.req.rid)
    assert all(a.finish_t <= b.first_t for a, b in zip(order, order[1:]))
    assert "one-at-a-time" in res.to_dict()["deployment"]["scheduler"]


def test_registration_is_unique_and_unknown_names_list_the_registered():
    with pytest.raises(ValueError, match="already registered"):
        register_policy("vllm")(OneAtATime)
    with pytest.raises(ValueError, match="already registered"):
        register_router("kv-aware")(LastReplica)
    assert list(POLICIES) == ["vllm", "orca", "sarathi"]
    assert list(ROUTERS) == ["round-robin", "least-outstanding", "kv-aware"]


def test_unknown_policy_or_router_is_a_workload_error(a100, costs):
    req = [Request(0, 0.0, 32, 2)]
    with pytest.raises(WorkloadError, match="unknown scheduling policy 'fifo'.*vllm, orca, sarathi"):
        serve(a100, ServeSetup(MODEL, PoolSpec(1, 1, SchedulerSpec("fifo"))), req, costs=costs)
    with pytest.raises(WorkloadError, match="unknown router 'random'.*round-robin"):
        serve(a100, ServeSetup(MODEL, PoolSpec(2, 1), router="random"), req, costs=costs)
