"""The closed loop's queueing mechanism on tiny cases, worked out in iterations.

The closed-loop TTFT is set by where a prompt lands in the engine's iteration calendar,
not by the prefill kernel: ``N`` clients send together at t = 0, the engine takes at most
``B`` tokens per iteration (decodes included), and a request beyond the engine's batch cap
waits for a slot. Each expected value below is an iteration count worked out by hand from
``N``, ``isl`` and ``B`` and read off the simulator's own iteration timeline (its end
times), so it holds whatever the design's iteration costs are.
"""

from __future__ import annotations

import math

import pytest

from archsim.serve import LengthDist, PoolSpec, SchedulerSpec, ServeSetup, serve
from archsim.serve.requests import closed_loop
from archsim.validation.serving_h100 import (
    HEADROOM_TOKENS,
    Deployment,
    engine_settings,
)
from tests.serve.conftest import MODEL


def _run(acc, costs, n, isl, osl, sched, count=None):
    raw: dict = {}
    setup = ServeSetup(MODEL, PoolSpec(scheduler=sched))
    serve(acc, setup, closed_loop(count or n, LengthDist("fixed", isl), LengthDist("fixed", osl)),
          costs=costs, raw_out=raw, concurrency=n)
    ends = [start + dt for _, start, dt, *_ in raw["timeline"]]
    st = sorted(raw["states"], key=lambda s: s.req.rid)
    return st, ends, raw


def _iteration_of(t, ends):
    """1-based index of the iteration that ends at ``t``."""
    (k,) = [i for i, e in enumerate(ends, 1) if e == pytest.approx(t, abs=1e-12)]
    return k


@pytest.mark.parametrize("isl,budget", [(1000, 1500), (1000, 2000), (700, 1024)])
def test_chunked_wave_kth_prompt_finishes_at_ceil_k_isl_over_budget(a100, costs, isl, budget):
    # N prompts of isl tokens arrive together; one output token each (no decodes ever take
    # budget), chunked prefill of at most B tokens per iteration in arrival order:
    # prompt k's last token is token k*isl of the wave -> iteration ceil(k*isl/B)
    n = 5
    st, ends, _ = _run(a100, costs, n, isl, 1, SchedulerSpec("sarathi", chunk=budget))
    assert len(ends) == math.ceil(n * isl / budget)
    for k, s in enumerate(st, 1):
        assert _iteration_of(s.first_t, ends) == math.ceil(k * isl / budget)


def test_whole_prompt_budget_admits_one_prompt_per_iteration(a100, costs):
    # TensorRT-LLM as deployed: whole prompts (no chunking) in a budget of N + isl + 1500
    # tokens; two prompts need 2*isl > N + isl + 1500 when isl > N + 1500, so the wave of N
    # prompts is served one per iteration: prompt k's first token ends iteration k
    n, isl, osl = 4, 2048, 3
    budget = n + isl + HEADROOM_TOKENS
    assert 2 * isl > budget
    st, ends, _ = _run(a100, costs, n, isl, osl, SchedulerSpec("orca", max_batched_tokens=budget))
    for k, s in enumerate(st, 1):
        assert _iteration_of(s.first_t, ends) == k


def test_a_client_beyond_the_batch_cap_waits_for_a_slot(a100, costs):
    # three clients, engine cap two running requests: the third prompt is admitted only in
    # the iteration after the first request finishes (its slot frees), so its TTFT is the
    # first request's whole E2E plus exactly one more iteration (its own prefill)
    n, isl, osl = 3, 64, 8
    st, ends, _ = _run(a100, costs, n, isl, osl,
                       SchedulerSpec("vllm", max_num_seqs=2, max_batched_tokens=4096))
    first, _, third = st
    assert third.req.arrival_s == 0.0
    done = _iteration_of(first.finish_t, ends)
    assert _iteration_of(third.first_t, ends) == done + 1
    assert third.first_t - third.req.arrival_s > first.finish_t - first.req.arrival_s


def test_uncapped_client_is_admitted_with_the_wave(a100, costs):
    # the same three clients with a cap of three: all prompts share the first iteration
    st, ends, _ = _run(a100, costs, 3, 64, 8,
                       SchedulerSpec("vllm", max_num_seqs=3, max_batched_tokens=4096))
    assert {_iteration_of(s.first_t, ends) for s in st} == {1}


def _row(backend, conc, isl):
    return Deployment(backend, "m/x", "", "agg", isl, 128, conc, 1, 1, 0, 0, 1.0, 1.0, 2)


@pytest.mark.parametrize("backend,expect", [
    # aiconfigurator's generated agg worker: max_num_tokens = max_batch_size + isl + 1500 =
    # 16 + 2048 + 1500 = 3564, max_batch_size = the benchmark's 16 clients; TensorRT-LLM
    # holds one slot back (15); SGLang runs its own default 8192-token prefill batches
    ("trtllm", ("orca", 3564, 15)), ("vllm", ("sarathi", 3564, 16)),
    ("sglang", ("vllm", 8192, 16))])
def test_engine_settings_follow_the_deployment_rule(backend, expect):
    e = engine_settings(_row(backend, 16, 2048))
    assert (e.policy, e.token_budget, e.max_num_seqs) == expect
