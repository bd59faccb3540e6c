"""KV-cache techniques on ``archsim run`` and plans (issue 31, the techniques' gaps): the
mechanism objects of serving (workloads/kvtech.py) built into one device's graph by
``DeviceBuild`` (the one builder of per-device work); run, a plan of degree 1 and a serving
replica agree for one request; closed forms, directions, refusals naming the flag."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

import archsim
from archsim.api import device_build
from archsim.arch.cluster import find_cluster, load_cluster, single_node
from archsim.cli import main
from archsim.parallel import evaluate_plan
from archsim.plans import search_plans
from archsim.run_request import RunRequest, evaluate_request
from archsim.serve.cost import Batch, IterationCost
from archsim.workloads.errors import WorkloadError
from archsim.workloads.kvtech import KVTechniques, decode_keys, prefix_hit_tokens, select_keys
from archsim.workloads.parallel import ParallelPlan
from archsim.workloads.tags import ATTENTION_CORE_ROLES
from archsim.workloads.zoo import transformer_shape

MODEL = "llama2-7b"      # multi-head attention: remat pays off (d 4096 < 2 x 32 x 128)


@pytest.fixture(scope="module")
def h100():
    return archsim.load("gpu/h100")


def _three(h100, kv: KVTechniques, phase: str, seq=None, ctx=None, block: int = 16):
    """(run, plan of degree 1) of one request with ``kv``."""
    run = evaluate_request(RunRequest(config="gpu/h100", model=MODEL, phase=phase, seq=seq,
                                      context=ctx, kv=kv, block_size=block), h100)
    b = device_build(h100, kv=kv, kv_block_size=block)
    plan = evaluate_plan(single_node(h100, 1), MODEL, ParallelPlan(), phase, 1, seq, ctx,
                         build=b)
    return run, plan


@pytest.mark.parametrize("ctx", [3, 6])
def test_remat_run_plan_serve_agree(h100, ctx):
    """One decode step at a context on both serving grids (exact there): run = plan = the
    serving replica's iteration; its extra FLOPs are L x keys x 2 d x 2 kv hd."""
    kv = KVTechniques(remat=True)
    run, plan = _three(h100, kv, "decode", ctx=ctx)
    serve = IterationCost(h100, MODEL, 1, kv=kv).cost(Batch([], 1, ctx + 1, 1))
    assert run.latency_s == pytest.approx(plan.step_s, rel=1e-12)
    assert run.latency_s == pytest.approx(serve.time_s, rel=1e-12)
    plain = evaluate_request(RunRequest(config="gpu/h100", model=MODEL, phase="decode",
                                        context=ctx), h100)
    s = transformer_shape(MODEL)
    assert run.flops - plain.flops == s.layers * (ctx + 1) * 2 * s.d_model * 2 * s.kv * s.hd
    assert run.latency_s > plain.latency_s          # direction: recomputing costs time


def test_remat_halves_the_plan_cache_of_a_multi_head_model(h100):
    """The cache holds X (d values per token and layer) instead of K and V (2 kv hd):
    llama2-7b's 4096 vs 8192, half."""
    b0, b1 = device_build(h100), device_build(h100, kv=KVTechniques(remat=True))
    c = single_node(h100, 1)
    m0 = evaluate_plan(c, MODEL, ParallelPlan(), "decode", 8, None, 2000, build=b0)
    m1 = evaluate_plan(c, MODEL, ParallelPlan(), "decode", 8, None, 2000, build=b1)
    assert m1.memory_bytes["kv_cache"] == pytest.approx(m0.memory_bytes["kv_cache"] / 2,
                                                        rel=1e-12)
    assert m0.memory_bytes["kv_cache"] == 32 * 8 * 2001 * 2 * 32 * 128 * 2


def test_topk_run_plan_serve_agree(h100):
    """Top-3 blocks of 8 over a 519-token context: 24 keys attended and 65 blocks scored
    (both on the serving grids): run = plan = serving; the attention core's MACs are
    L x 2 heads hd (24 + 65)."""
    kv = KVTechniques(topk_blocks=3)
    ctx, block = 519, 8
    assert (decode_keys(ctx, 3, block), select_keys(ctx, block)) == (24, 65)
    run, plan = _three(h100, kv, "decode", ctx=ctx, block=block)
    serve = IterationCost(h100, MODEL, 1, kv=kv).cost(Batch([], 1, 24, 1, 65))
    assert run.latency_s == pytest.approx(plan.step_s, rel=1e-12)
    assert run.latency_s == pytest.approx(serve.time_s, rel=1e-12)
    s = transformer_shape(MODEL)
    core = sum(o.macs for o in run.ops if o.role in ATTENTION_CORE_ROLES)
    assert core == s.layers * 2 * s.heads * s.hd * (24 + 65)


def test_topk_shortens_a_long_decode(h100):
    plain = evaluate_request(RunRequest(config="gpu/h100", model=MODEL, phase="decode",
                                        batch=8, context=4000), h100)
    topk = evaluate_request(RunRequest(config="gpu/h100", model=MODEL, phase="decode",
                                       batch=8, context=4000, kv=KVTechniques(topk_blocks=16)),
                            h100)
    assert topk.latency_s < plain.latency_s


@pytest.mark.parametrize("rate,serve_rel", [(0.25, 0.05), (0.5, 0.005), (0.75, 0.02)])
def test_prefix_run_plan_agree_and_serving_shares_all_but_the_attention(h100, rate, serve_rel):
    """A 2048-token prompt with a share H cached: hit = floor(H P); run = plan exactly; every
    block op outside the attention core has (P - hit) / P of its FLOPs; the core's MACs are
    the causal pairs of P - hit queries after hit keys, c P - c (c - 1) / 2 per head (2 GEMMs
    of hd MACs each). The serving replica prices the same rows and scales its grid attention
    by those causal pairs (docs/serving.md, "Cost model"): within 0.5 % and 2 % where the
    1024 and 512 new tokens are on its token grid, 5 % at 1536 (between grid points)."""
    p = 2048
    kv = KVTechniques(prefix_hit_rate=rate)
    hit = prefix_hit_tokens(p, rate)
    c = p - hit
    run, plan = _three(h100, kv, "prefill", seq=p)
    assert run.latency_s == pytest.approx(plan.step_s, rel=1e-12)
    plain = evaluate_request(RunRequest(config="gpu/h100", model=MODEL, phase="prefill",
                                        seq=p), h100)
    s = transformer_shape(MODEL)

    def block_flops(r):
        return sum(o.macs for o in r.ops if o.block is not None
                   and o.role not in ATTENTION_CORE_ROLES)
    assert block_flops(run) / block_flops(plain) == pytest.approx(c / p, rel=1e-12)
    core = sum(o.macs for o in run.ops if o.role in ATTENTION_CORE_ROLES)
    assert core == s.layers * 2 * s.heads * s.hd * (c * p - c * (c - 1) // 2)
    serve = IterationCost(h100, MODEL, 1).cost(Batch([(c, hit)], 0, 0, 1))
    assert serve.time_s == pytest.approx(run.latency_s, rel=serve_rel)
    assert run.latency_s < plain.latency_s            # direction


def test_kv_offload_on_a_plan_closed_form():
    """dgx1 (V100 32 GB, host link 7.88 GB/s x 0.8): llama2-7b decoding 16 x 4000 tokens
    needs 13.5 GB of weights + 33.6 GB of cache; with 24 GB of host memory per device the
    excess M = total - 32 GB lives on the host and streams back every step behind the
    compute: step = compute + max(0, M / B - compute); the device then holds exactly its
    capacity. Top-k 16 blocks streams only 256 / 4001 of it."""
    dgx1 = load_cluster(find_cluster("dgx1"))
    b0 = device_build(dgx1.device)
    base = evaluate_plan(dgx1, MODEL, ParallelPlan(), "decode", 16, None, 4000, build=b0)
    cap = base.capacity_bytes
    assert not base.fits
    moved = base.memory_bytes["total"] - cap
    bw = 7.88e9 * 0.8
    for kv, share in ((KVTechniques(offload_gb=24), 1.0),
                      (KVTechniques(offload_gb=24, topk_blocks=16), 256 / 4001)):
        plain = evaluate_plan(dgx1, MODEL, ParallelPlan(), "decode", 16, None, 4000,
                              build=replace(b0, kv=replace(kv, offload_gb=0.0)))
        r = evaluate_plan(dgx1, MODEL, ParallelPlan(), "decode", 16, None, 4000,
                          build=replace(b0, kv=kv))
        assert r.fits and r.memory_bytes["total"] == pytest.approx(cap, rel=1e-12)
        exposed = max(0.0, moved * share / bw - plain.step_s)
        assert r.breakdown_s["kv_offload"] == pytest.approx(exposed, rel=1e-12)
        assert r.step_s == pytest.approx(plain.step_s + exposed, rel=1e-12)
    # not enough host memory: it still does not fit
    small = evaluate_plan(dgx1, MODEL, ParallelPlan(), "decode", 16, None, 4000,
                          build=replace(b0, kv=KVTechniques(offload_gb=1)))
    assert not small.fits and math.isclose(small.memory_bytes["total"], base.memory_bytes[
        "total"] - 1e9)


def test_search_plans_takes_the_techniques():
    found = search_plans("dgx_h100", MODEL, 2, phase="decode", batch=8, context=2000,
                         kv=KVTechniques(remat=True))
    plain = search_plans("dgx_h100", MODEL, 2, phase="decode", batch=8, context=2000)
    assert found.best is not None and plain.best is not None
    assert found.best.step_s > plain.best.step_s


@pytest.mark.parametrize("kw,flag,what", [
    ({"phase": "decode", "context": 100, "kv": KVTechniques(prefix_hit_rate=0.5)},
     "--prefix-hit-rate", "--phase prefill"),
    ({"phase": "prefill", "seq": 128, "kv": KVTechniques(remat=True)}, "--kv-remat",
     "--phase decode"),
    ({"phase": "decode", "context": 100, "kv": KVTechniques(topk_blocks=256)}, "--topk-blocks",
     "whole 4096-token context"),
    ({"phase": "decode", "context": 100, "kv": KVTechniques(offload_gb=8)}, "--kv-offload-gb",
     "no host link"),
    ({"model": "llama3-8b", "phase": "decode", "context": 100, "kv": KVTechniques(remat=True)},
     "--kv-remat", "not smaller"),
])
def test_run_refuses_naming_the_flag(h100, kw, flag, what):
    with pytest.raises(WorkloadError, match=f"{flag}.*{what}|{what}.*{flag}"):
        evaluate_request(RunRequest(**({"config": "gpu/h100", "model": MODEL} | kw)), h100)


def test_plan_refuses_offload_without_a_host_link(h100):
    with pytest.raises(WorkloadError, match="--kv-offload-gb.*no host link"):
        evaluate_plan(load_cluster(find_cluster("dgx_h100")), MODEL, ParallelPlan(), "decode",
                      8, None, 1000,
                      build=device_build(h100, kv=KVTechniques(offload_gb=8)))


def test_cli(capsys):
    assert main(["run", "gpu/h100", "--model", MODEL, "--phase", "prefill", "--seq", "1024",
                 "--prefix-hit-rate", "0.5", "--json"]) == 0
    argv = json.loads(capsys.readouterr().out)["extra"]["provenance"]["argv"]
    assert argv[-2:] == ["--prefix-hit-rate", "0.5"]
    assert main(["run", "gpu/h100", "--model", "llama3-8b", "--phase", "decode",
                 "--kv-remat"]) == 2
    err = capsys.readouterr().err
    assert "--kv-remat" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["plan", "dgx1", "--model", MODEL, "--devices", "1", "--phase", "decode",
                 "--batch", "16", "--context", "4000", "--kv-offload-gb", "24"]) == 0
    assert "kv_offload" in capsys.readouterr().out


@pytest.mark.parametrize("phase,kw,kv,block", [
    ("decode", {"context": 519}, KVTechniques(topk_blocks=3), 8),
    ("decode", {"context": 1000}, KVTechniques(remat=True, topk_blocks=16), 16),
    ("prefill", {"seq": 2048}, KVTechniques(prefix_hit_rate=0.5), 16),
])
def test_python_api_is_the_run(h100, phase, kw, kv, block):
    """``archsim.evaluate(acc, archsim.workload(..., kv=...))`` evaluates what ``archsim run``
    does with the flags (the same graph, bit for bit)."""
    att = "fused" if any(u.fused_attention() for u in h100.units) else "unfused"
    wl = archsim.workload(MODEL, phase=phase, attention=att, kv=kv, kv_block_size=block, **kw)
    run = evaluate_request(RunRequest(config="gpu/h100", model=MODEL, phase=phase, kv=kv,
                                      block_size=block, **kw), h100)
    assert archsim.evaluate(h100, wl).latency_s == run.latency_s
    with pytest.raises(WorkloadError, match="--kv-offload-gb.*host link"):
        archsim.workload(MODEL, phase="decode", kv=KVTechniques(offload_gb=1))
