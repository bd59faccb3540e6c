"""A serving engine's host time per iteration (``archsim serve --engine``,
``archsim/serve/engine.py``): closed forms of the mechanism on tiny closed loops, the row ->
engine rule, the fit, and the flags' errors. The fitted constants' check errors on the
measured H100 deployments are in tests/serve/test_serving_h100.py and docs/serving.md
"Engine host time".
"""

from __future__ import annotations

from dataclasses import replace

import pytest

import archsim
from archsim.serve import LengthDist, PoolSpec, SchedulerSpec, ServeSetup, serve
from archsim.serve.engine import ENGINES, EngineHost, engine_host, graph_runtime, with_engine
from archsim.serve.requests import closed_loop
from archsim.serve.session import run_serving
from archsim.validation.serving_h100 import Deployment, engine_for, fit_host
from archsim.workloads.errors import WorkloadError
from tests.serve.conftest import MODEL

N, ISL, OSL = 4, 64, 5


def _timeline(acc, costs, sched):
    """Iteration durations (s) of N clients sending one request each of ISL / OSL tokens,
    whole prompts in the first iteration (budget 2048), then OSL - 1 decode iterations of
    the N requests: every iteration runs N sequences."""
    raw: dict = {}
    serve(acc, ServeSetup(MODEL, PoolSpec(scheduler=sched)),
          closed_loop(N, LengthDist("fixed", ISL), LengthDist("fixed", OSL)),
          costs=costs, raw_out=raw, concurrency=N)
    return [(dt, pre, dec) for _, _, dt, pre, dec, *_ in raw["timeline"]]


@pytest.fixture(scope="module")
def base(a100, costs):
    return _timeline(a100, costs, SchedulerSpec("vllm", max_batched_tokens=2048))


def test_the_iterations_are_one_prefill_then_decodes_of_every_request(base):
    assert [(pre, dec) for _, pre, dec in base] == [(N * ISL, 0)] + [(0, N)] * (OSL - 1)


def test_a_synchronous_engine_adds_its_host_time_to_every_iteration(a100, costs, base):
    # host a + b x sequences, after the GPU step: each iteration exactly a + b x N longer
    e = EngineHost("t", 1.3, 0.05, False, "test")
    got = _timeline(a100, costs, with_engine_spec(e))
    assert len(got) == len(base)
    for (dt, *_), (dt0, *_) in zip(got, base, strict=True):
        assert dt - dt0 == pytest.approx((1.3 + 0.05 * N) * 1e-3, rel=1e-12)


@pytest.mark.parametrize("a_ms", [0.01, 500.0])
def test_an_async_engine_takes_the_longer_of_gpu_and_host(a100, costs, base, a_ms):
    # the host prepares step N+1 while the GPU runs step N: max(gpu, host) per iteration
    e = EngineHost("t", a_ms, 0.0, True, "test")
    got = _timeline(a100, costs, with_engine_spec(e))
    for (dt, *_), (dt0, *_) in zip(got, base, strict=True):
        assert dt == pytest.approx(max(dt0, a_ms * 1e-3), rel=1e-12)
    assert (a_ms > 1) == all(dt > dt0 for (dt, *_), (dt0, *_) in zip(got, base, strict=True))


def with_engine_spec(e: EngineHost) -> SchedulerSpec:
    return SchedulerSpec("vllm", max_batched_tokens=2048, overhead_s=e.per_iteration_ms * 1e-3,
                         overhead_per_seq_s=e.per_seq_ms * 1e-3, overlap_host=e.overlap)


def test_with_engine_sets_the_spec_from_the_registry():
    s = with_engine(SchedulerSpec(), "vllm-sync")
    v = ENGINES["vllm-sync"]
    assert (s.overhead_s, s.overhead_per_seq_s, s.overlap_host) == pytest.approx(
        (v.per_iteration_ms * 1e-3, v.per_seq_ms * 1e-3, False))
    assert with_engine(SchedulerSpec(), "vllm").overlap_host
    # vLLM turns async scheduling off under pipeline parallelism
    assert engine_host("vllm", pp=2) is ENGINES["vllm-sync"]
    assert engine_host("trtllm", pp=2) is ENGINES["trtllm"]
    with pytest.raises(WorkloadError, match="--engine"):
        engine_host("vllm-async")


def test_tpot_of_a_closed_loop_grows_by_the_host_time_of_its_batch():
    # one request per client, all alike: every decode iteration runs the N requests, so the
    # mean TPOT is the decode step + host(N), on the GPU under CUDA-graph replay in both
    h100 = archsim.load("gpu/h100")
    kw = dict(model="llama3-8b", concurrency=N, isl=str(ISL), osl=str(OSL), requests=N)
    bare = run_serving(graph_runtime(h100), **kw).benchmark
    eng = run_serving(h100, engine="vllm-sync", **kw).benchmark
    v = ENGINES["vllm-sync"]
    assert eng.tpot_ms["mean"] - bare.tpot_ms["mean"] == pytest.approx(
        v.per_iteration_ms + v.per_seq_ms * N, rel=1e-9)
    with pytest.raises(WorkloadError, match="--iteration-overhead-ms"):
        run_serving(h100, engine="trtllm", iteration_overhead_ms=1.0, **kw)


def test_graph_runtime_replaces_only_the_ideal_protocol():
    h100 = archsim.load("gpu/h100")
    assert graph_runtime(h100).units[0].spec.runtime == "cuda_graph"
    eager = archsim.load("gpu/h100", ["units[0].runtime=eager"])
    assert graph_runtime(eager) is eager


def _row(backend: str, version: str) -> Deployment:
    return Deployment(backend, "Qwen/Qwen3-32B", "", "agg", 1024, 128, 8, 2, 1, 0, 0, 1.0,
                      1.0, 2, version=version)


@pytest.mark.parametrize("backend,version,engine", [
    ("vllm", "0.12.0", "vllm-sync"), ("vllm", "0.11.2", "vllm-sync"),
    ("vllm", "0.13.1", "vllm-sync"), ("vllm", "0.14.0", "vllm"), ("vllm", "0.18.0", "vllm"),
    ("vllm", "", "vllm-sync"), ("trtllm", "1.0.0rc3", "trtllm"),
    ("sglang", "0.5.1.post1", "sglang"),
])
def test_a_row_runs_as_its_backend_and_release(backend, version, engine):
    assert engine_for(_row(backend, version)) == engine


def test_fit_host_recovers_a_line_and_ignores_an_outlier():
    pts = [(n, 0.7 + 0.02 * n) for n in (8, 16, 32, 64, 128)]
    assert fit_host(pts) == (0.7, 0.02)
    # least absolute deviation: one wild row does not move it
    assert fit_host(pts + [(64, 40.0)]) == (0.7, 0.02)
    # a host cannot give time back: negative residuals fit as no host time
    assert fit_host([(8, -1.0), (16, -2.0)]) == (0.0, 0.0)


def test_the_registry_is_what_the_docs_say():
    # vLLM's async engine reuses the synchronous engine's host time, hidden
    assert replace(ENGINES["vllm"], name="vllm-sync", overlap=False,
                   source=ENGINES["vllm-sync"].source) == ENGINES["vllm-sync"]
    assert ENGINES["none"].host_s(100) == 0.0
