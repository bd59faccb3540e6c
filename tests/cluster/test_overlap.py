"""Overlap inside one device (issue 31 item 2): nano-batching (NanoFlow), token-splitting
(TokenWeave) and the fused all-reduce + RMSNorm; closed forms of the schedule, the plan-level
identities, directions and refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from archsim.api import device_build, evaluate
from archsim.arch.cluster import load_cluster
from archsim.arch.collective import collective, multimem_allreduce, place
from archsim.mapper.overlap import Overlap, best_makespan, blocks_makespan, makespan, parse_overlap
from archsim.parallel import PlanOptions, evaluate_plan
from archsim.plans import search_plans
from archsim.workloads.errors import ConfigError
from archsim.workloads.parallel import ParallelPlan, block_graphs, layer_comms, without_collectives
from archsim.workloads.zoo import transformer_shape

CFG = Path(__file__).resolve().parents[2] / "configs" / "cluster"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dgx():
    return load_cluster(CFG / "dgx_h100.yaml")


def _run(dgx, overlap: str, phase: str = "prefill", batch: int = 8, tp: int = 8, **kw):
    seq = 1024 if phase == "prefill" else None
    ctx = 1024 if phase == "decode" else None
    return evaluate_plan(dgx, "llama3-70b", ParallelPlan(tp=tp, **kw), phase, batch, seq, ctx,
                         options=PlanOptions(overlap=parse_overlap(overlap)))


# --- parsing --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,k,streams,fused", [
    ("none", 1, 3, False), ("nanobatch:4", 4, 3, False), ("tokensplit", 2, 2, False),
    ("fused-ar-norm", 1, 3, True), ("tokensplit+fused-ar-norm", 2, 2, True),
    ("nanobatch:2+fused-ar-norm", 2, 3, True)])
def test_parse(text, k, streams, fused):
    o = parse_overlap(text)
    assert (o.nano_batches, o.streams, o.fused_ar_norm) == (k, streams, fused)
    assert parse_overlap(o.label()) == o


@pytest.mark.parametrize("text,what", [
    ("nanobatch:0", "whole number"), ("nanobatch:x", "whole number"), ("overlapall", "unknown"),
    ("tokensplit+nanobatch:2", "twice"), ("fused-ar-norm+fused-ar-norm", "twice")])
def test_parse_refuses(text, what):
    with pytest.raises(ConfigError, match=f"--overlap.*{what}"):
        parse_overlap(text)


# --- the schedule's closed forms ------------------------------------------------------------------
SMS = 132
S_NET = 8 / 132


def test_one_nano_batch_is_the_chain_sum():
    chain = [("compute", 0.3), ("memory", 0.1), ("network", 0.2), ("compute", 0.7)]
    o = Overlap(nano_batches=1)
    assert makespan(chain, o, SMS) == 0.3 + 0.1 + 0.2 + 0.7


def test_token_split_compute_bound_closed_form():
    # two halves of compute c and all-reduce n (each half: c/2 then n/2): the first half's
    # all-reduce runs beside the second half's compute, which loses 8 of 132 SMs meanwhile;
    # T = c/2 + n/2 + (c/2 - (1 - s) n/2) + n/2 = c + n/2 + s n/2
    c, n = 1.0, 0.4
    t = makespan([("compute", c / 2), ("network", n / 2)], Overlap(2, streams=2), SMS)
    assert t == pytest.approx(c + n / 2 + S_NET * n / 2, rel=1e-12)
    # never below max(compute, comm) + the unoverlapped edge (the last half's all-reduce)
    assert t >= max(c, n) + n / 2


def test_token_split_comm_bound_closed_form():
    # the all-reduce outlasts the other half's compute: T = c/2 + n (max(...) + the first edge)
    c, n = 0.4, 1.0
    t = makespan([("compute", c / 2), ("network", n / 2)], Overlap(2, streams=2), SMS)
    assert t == pytest.approx(c / 2 + n, rel=1e-12)


def test_nano_batch_compute_memory_closed_form():
    # nano-batch 0's memory kernel m runs beside nano-batch 1's compute c: the memory kernel at
    # interference I (its share 0.5 saturates HBM), the compute at (1 - 0.5) I; then each alone.
    # T = c + m/I + (c - r_c m/I) + m
    c, m, i = 10.0, 2.0, 0.9
    o = Overlap(2, streams=3, interference=i, hbm_saturating_share=0.5)
    r_c = 0.5 * i
    t = makespan([("compute", c), ("memory", m)], o, SMS, mem_share=0.5)
    assert t == pytest.approx(2 * c + m + m * (1 - r_c) / i, rel=1e-12)


def test_one_kind_only_is_not_overlapped():
    # a chain of compute kernels only: nothing runs concurrently, the nano-batches add up
    chain = [("compute", 0.2), ("compute", 0.5)]
    for k in (2, 3, 4):
        assert makespan(chain, Overlap(k), SMS, 0.3) == pytest.approx(k * 0.7, rel=1e-12)


# --- plans: identities, directions, the mechanism's amounts ---------------------------------------
def test_one_nano_batch_plan_is_bit_for_bit_no_overlap(dgx):
    for phase in ("prefill", "decode"):
        a, b = _run(dgx, "none", phase), _run(dgx, "nanobatch:1", phase)
        assert (a.step_s, dict(a.breakdown_s), a.energy_j) == \
            (b.step_s, dict(b.breakdown_s), b.energy_j)


def test_token_split_and_fused_kernel_lower_a_compute_bound_prefill(dgx):
    # LLaMA-3-70B prefill of 8192 tokens on 8x H100 (TP 8): TokenWeave's setting
    none = _run(dgx, "none")
    split = _run(dgx, "tokensplit")
    both = _run(dgx, "tokensplit+fused-ar-norm")
    assert both.step_s < split.step_s < none.step_s
    # the exposed all-reduce shrinks below half of its unoverlapped time
    assert split.breakdown_s["tp_comm"] < 0.7 * none.breakdown_s["tp_comm"]


def test_splitting_a_weight_bound_decode_costs_time(dgx):
    # decode at batch 64: every GEMM reads its weights; two nano-batches read them twice
    assert _run(dgx, "nanobatch:2", "decode", 64).step_s > _run(dgx, "none", "decode", 64).step_s
    assert _run(dgx, "tokensplit", "decode", 64).step_s > _run(dgx, "none", "decode", 64).step_s


def test_fused_kernel_removes_the_norms_and_runs_the_reduction_at_nvls(dgx):
    s = transformer_shape("llama3-70b")
    plan = ParallelPlan(tp=8)
    none, fused = _run(dgx, "none"), _run(dgx, "fused-ar-norm")
    # the removed memory passes: the block's norm and residual ops (by role) x 80 blocks,
    # from the device's own evaluation of the block graph
    g = block_graphs(s, plan, "prefill", 8, 1024, None, device_build(dgx.device))["dense"]
    r = evaluate(dgx.device, without_collectives(g))
    norms = sum(o.latency_s for o in r.ops if o.block == 0 and o.role in ("norm", "residual"))
    assert none.breakdown_s["compute"] - fused.breakdown_s["compute"] == \
        pytest.approx(80 * norms, rel=1e-9)
    # the all-reduces at the NVLS rate, one multimem kernel each (a CUDA-graph launch and a
    # one-shot barrier, 3.86 + 0.57 us, + S / (0.562 x 450 GB/s), configs/cluster/dgx_h100.yaml)
    # x 2 per block x 80 blocks; S = 8192 tokens x 8192 x 2 bytes
    grp = place(dgx, 8, 1)
    nvls = 2 * ((3.86 + 0.57) * 1e-6 + 8192 * 8192 * 2 / (0.562 * 450e9))
    emb = none.breakdown_s["tp_comm"] - 80 * sum(
        collective(dgx, c.kind, c.payload_bytes(), grp).time_s
        for c in layer_comms(s, plan, "prefill", 8, 1024, False) if c.group == "tp")
    assert fused.breakdown_s["tp_comm"] == pytest.approx(80 * nvls + emb, rel=1e-9)


# --- refusals -------------------------------------------------------------------------------------
@pytest.mark.parametrize("overlap,phase,batch,tp,kw,what", [
    ("tokensplit", "train", 8, 8, {}, "inference"),
    ("tokensplit", "prefill", 8, 1, {}, "no tensor-parallel all-reduce"),
    ("fused-ar-norm", "prefill", 8, 1, {}, "no tensor-parallel all-reduce"),
    ("nanobatch:3", "prefill", 8, 8, {}, "does not split into 3"),
    ("fused-ar-norm", "prefill", 8, 8, {"sequence_parallel": True}, "sequence parallelism")])
def test_refused_with_a_reason(dgx, overlap, phase, batch, tp, kw, what):
    with pytest.raises(ConfigError, match=f"--overlap.*{what}"):
        _run(dgx, overlap, phase, batch, tp, **kw)


def test_fused_kernel_needs_nvls():
    a100 = load_cluster(CFG / "dgx_a100.yaml")
    with pytest.raises(ConfigError, match="--overlap.*NVLink SHARP"):
        _run(a100, "fused-ar-norm")
    # nano-batching needs no NVLS: the A100 runs it
    assert _run(a100, "nanobatch:2").step_s > 0


def test_tp_overlap_and_overlap_are_alternatives(dgx):
    with pytest.raises(ConfigError, match="--tp-overlap and --overlap"):
        evaluate_plan(dgx, "llama3-70b", ParallelPlan(tp=8), "prefill", 8, 1024,
                      options=PlanOptions(tp_overlap=True, overlap=parse_overlap("tokensplit")))


def test_search_leaves_out_plans_it_cannot_apply_to():
    found = search_plans("dgx_h100", "llama3-8b", 8, phase="prefill", batch=8, seq=1024,
                         overlap="tokensplit")
    assert found.ranked and all(r.plan.tp > 1 for r in found.ranked)


def test_cli_bad_overlap_exits_2_naming_the_flag():
    p = subprocess.run([sys.executable, "-m", "archsim", "run", "dgx_h100", "--model",
                        "llama3-8b", "--phase", "prefill", "--tp", "8", "--overlap", "nano"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 2
    assert "--overlap" in p.stderr and "unknown overlap" in p.stderr
    assert "Traceback" not in p.stderr


def test_search_with_the_fused_kernel_runs_its_plans_without_sequence_parallelism():
    found = search_plans("dgx_h100", "llama3-8b", 8, phase="prefill", batch=8, seq=1024,
                         overlap="fused-ar-norm")
    assert found.ranked and all(r.plan.tp > 1 and not r.plan.sequence_parallel
                                for r in found.ranked)
    with pytest.raises(ConfigError, match="no plan of 8 devices.*NVLink SHARP"):
        search_plans("dgx_a100", "llama3-8b", 8, phase="prefill", batch=8, seq=1024,
                     overlap="fused-ar-norm")


def test_multimem_all_reduce_never_beats_the_nvls_transfer_and_needs_nvls(dgx):
    g = place(dgx, 8, 1)
    for s in (2 ** 14, 2 ** 20, 2 ** 27):
        m = multimem_allreduce(dgx, s, g)
        nccl = collective(dgx, "allreduce", s, g, algorithm="nvls")
        assert s / (0.562 * 450e9) <= m.time_s <= nccl.time_s
    with pytest.raises(ConfigError, match="NVLink SHARP"):
        a100 = load_cluster(CFG / "dgx_a100.yaml")
        multimem_allreduce(a100, 2 ** 20, place(a100, 8, 1))


@pytest.mark.parametrize("overlap", ["tokensplit", "nanobatch:2", "nanobatch:4"])
def test_blocks_extrapolation_equals_simulating_every_block(overlap):
    block = [("memory", 0.2), ("compute", 0.9), ("memory", 0.4), ("compute", 0.5),
             ("network", 0.6), ("memory", 0.1), ("compute", 1.3), ("network", 0.6)]
    o = parse_overlap(overlap)
    assert blocks_makespan(block, o, SMS, 40) == \
        pytest.approx(best_makespan(block * 40, o, SMS)[0], rel=1e-9)
