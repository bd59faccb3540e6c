"""Op tags (workloads/tags.py): the builders tag what we expect, the transforms keep the tags,
and plans and serving select ops by tag only: renaming every op to a meaningless name gives
bit-identical plan and serving results."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path

import pytest

import archsim
import archsim.parallel as parallel_mod
import archsim.serve.cost as serve_cost
import archsim.workloads.parallel as workloads_parallel
from archsim.arch.cluster import load_cluster
from archsim.parallel import PlanOptions, _split, cp_scale, evaluate_plan
from archsim.serve.cost import Batch, IterationCost
from archsim.workloads.errors import WorkloadError
from archsim.workloads.graph import Workload
from archsim.workloads.models.transformer import TransformerShape, build_transformer
from archsim.workloads.ops import Attention, Gemm, Norm
from archsim.workloads.parallel import ParallelPlan, without_collectives
from archsim.workloads.tags import ATTENTION_CORE_ROLES, EXPERT_ROLES, ROLES
from archsim.workloads.zoo import transformer_shape

CFG = Path(__file__).resolve().parents[2] / "configs" / "cluster"

#: a small Llama-style decoder (RoPE, SwiGLU, RMSNorm, GQA) with dropout in training
LLAMA = TransformerShape(name="llama-tags", kind="decoder", layers=4, d_model=1024, heads=16,
                         kv_heads=4, ffn=2816, vocab=32000, context=4096, ffn_kind="swiglu",
                         norm="rmsnorm", bias=False, positions="rope", tied_embeddings=False,
                         dropout=True, default_seq=1024)
#: the same with ALiBi (a vector op on the scores inside the attention core)
ALIBI = replace(LLAMA, name="alibi-tags", positions="alibi")
#: a small mixture of experts (one dense block, routed + shared experts)
MOE = replace(LLAMA, name="moe-tags", experts=8, top_k=2, shared_experts=1, moe_ffn=1408,
              dense_layers=1)


def renamed(w: Workload) -> Workload:
    """``w`` with every op renamed ``x<n>`` (n counting down), structure and tags kept."""
    ops = w.ops()
    new = {op.name: f"x{len(ops) - i}" for i, op in enumerate(ops)}
    out = Workload(w.name, w.phase, w.batch, w.seq, w.context, w.parameters, w.family,
                   tied=frozenset(new[t] for t in w.tied), devices=w.devices)
    for op in ops:
        out.add(replace(op, name=new[op.name], layer=""),
                [new[p] for p in w.predecessors(op.name)])
    return out


def tags(w: Workload) -> list[tuple[str, int | None, str]]:
    return [(op.pass_, op.block, op.role) for op in w.ops()]


# --- the builders tag what we expect --------------------------------------------------------
@pytest.mark.parametrize("attention", ["unfused", "fused"])
def test_decoder_tags(attention):
    w = build_transformer(LLAMA, "prefill", 2, 256, attention=attention)
    roles = Counter(op.role for op in w.ops())
    n = LLAMA.layers
    if attention == "fused":
        core = [op for op in w.ops() if op.role == "attention"]
        assert all(isinstance(op, Attention) for op in core)
        assert roles["qk"] == roles["av"] == roles["attn"] == 0
    else:
        core = [op for op in w.ops() if op.role == "qk"]
        assert roles["av"] == roles["attn"] == n
    assert sorted(op.block for op in core) == list(range(n))
    # one per block: qkv, proj, rope, two norms, gate/up/down, activation; the two residual
    # adds run inside the norm after each (fused inference: the next block's ln1, ln2, the
    # final norm; block 0's ln1 priced alike), so no residual op is left
    for r in ("qkv", "proj", "rope", "ffn_gate", "ffn_up", "ffn_down", "act"):
        assert roles[r] == n, r
    assert roles["norm"] == 2 * n + 1 and roles["residual"] == 0     # + final norm
    assert sum(op.residual for op in w.ops() if isinstance(op, Norm)) == 2 * n + 1
    assert roles["embedding"] == 1 and roles["lm_head"] == 1
    # outside the blocks: embedding, final norm, head; every op has a known role
    assert {op.role for op in w.ops() if op.block is None} == {"embedding", "norm", "lm_head"}
    assert "" not in roles


def test_every_zoo_transformer_op_has_a_role_and_a_block_iff_in_a_block():
    for name in ("gpt3-small", "llama2-7b", "mixtral-8x7b", "deepseek-v3", "bloom-176b",
                 "bert-base", "vit-b16", "opt-13b"):
        s = transformer_shape(name)
        s = replace(s, layers=2, dense_layers=min(1, s.dense_layers))
        for phase in s.phases:
            seq = None if phase == "decode" or s.kind == "vit" else 64
            for kernels in ("fused", "eager_amp"):
                w = build_transformer(s, phase, 2, seq, kernels=kernels, tp=2 if s.heads % 2 == 0 else 1)
                for op in w.ops():
                    assert op.role in ROLES and op.role, (name, op.name)
                    # the builder's group label says which block an op is in
                    assert op.block == (int(op.layer.split(".")[1])
                                        if op.layer.startswith("blocks.") else None), op.name


def test_training_ops_keep_their_forward_tags():
    w = build_transformer(LLAMA, "train", 1, 128, attention="fused")
    fwd = {op.name: op for op in w.ops() if op.pass_group == "forward"}
    groups = Counter(op.pass_group for op in w.ops())
    assert groups["backward"] > groups["forward"] and groups["optimizer"] > 0
    # the fused attention's backward is one attention-core op per block, pass backward
    bwd_core = [op for op in w.ops() if op.role == "attention" and op.pass_group == "backward"]
    assert sorted(op.block for op in bwd_core) == list(range(LLAMA.layers))
    assert all(op.pass_ == "bwd_data" for op in bwd_core)
    for op in w.ops():
        if op.pass_group != "forward":
            owner = fwd[op.name.rsplit(".", 1)[0]]      # the builder's naming, test only
            assert (op.block, op.role) == (owner.block, owner.role), op.name
    upd = [op for op in w.ops() if op.pass_group == "optimizer"]
    assert {op.role for op in upd} >= {"qkv", "proj", "ffn_up", "norm", "embedding"}


def test_moe_tags():
    w = build_transformer(MOE, "prefill", 1, 128, ep=2)
    by_role = Counter((op.block, op.role) for op in w.ops())
    for r in EXPERT_ROLES:
        assert by_role[(0, r)] == 0 and by_role[(1, r)] == 1, r
    assert by_role[(1, "router")] == 2            # router GEMM and its softmax
    assert by_role[(1, "ffn_up")] == 1            # the shared expert
    assert by_role[(1, "combine")] == 1


def test_tags_survive_transforms():
    w = build_transformer(LLAMA, "train", 1, 128, tp=2)
    base = {op.name: (op.pass_, op.block, op.role) for op in w.ops()}
    fp8 = archsim.workloads.formats.get_format("fp8_e4m3")
    for t in (w.with_formats(fp8, fp8), w.with_sparsity(2, 4)):
        assert {op.name: (op.pass_, op.block, op.role) for op in t.ops()} == base
    nc = without_collectives(w)
    assert all(base[op.name] == (op.pass_, op.block, op.role) for op in nc.ops())
    assert not any(op.role == "collective" for op in nc.ops())
    assert tags(renamed(w)) == tags(w)
    conv = build_transformer(transformer_shape("vit-b16"), "inference", 1).op("embed.patch")
    g = conv.as_gemm()
    assert (g.role, g.block) == ("embedding", None)


def test_result_rows_carry_the_tags():
    w = build_transformer(LLAMA, "train", 1, 64)
    r = archsim.evaluate(archsim.load("gpu/h100"), w)
    assert [(o.pass_, o.block, o.role) for o in r.ops] == tags(w)
    d = r.to_dict()["ops"][0]
    assert {"pass_", "block", "role", "layer"} <= set(d)


def test_unknown_role_or_bad_block_is_an_error_naming_the_op():
    with pytest.raises(WorkloadError, match="g1.*role must be one of"):
        Gemm(name="g1", m=1, n=1, k=1, role="attention_core")
    with pytest.raises(WorkloadError, match="g2.*block must be None or an int >= 0"):
        Gemm(name="g2", m=1, n=1, k=1, block=-1)


# --- context parallelism scales the fused attention ----------------------------------------
def test_context_parallelism_scales_the_fused_attention():
    acc = archsim.load("gpu/h100")
    w = build_transformer(replace(LLAMA, layers=1), "train", 1, 512, attention="fused")
    res = archsim.evaluate(acc, without_collectives(w))
    att = {o.pass_group: o.latency_s for o in res.ops if o.role == "attention"}
    assert set(att) == {"forward", "backward"}
    one = _split(res, 0, ParallelPlan(), 1.0, cp_scale(w, 1, "train"))
    four = _split(res, 0, ParallelPlan(cp=4), 1.0, cp_scale(w, 4, "train"))
    # the graph holds q = 512 of the 2048 tokens; the causal op's share of the whole
    # sequence's pairs over its local pairs: (2048 x 2049 / 2 / 4) / (512 x 513 / 2)
    f = 2049 / 513
    assert one.attn_fwd == att["forward"] and one.attn_bwd == att["backward"]
    assert four.attn_fwd == pytest.approx(f * att["forward"], rel=1e-12)
    assert four.attn_bwd == pytest.approx(f * att["backward"], rel=1e-12)
    assert four.fwd - one.fwd == pytest.approx((f - 1) * att["forward"], rel=1e-12)
    assert four.bwd - one.bwd == pytest.approx((f - 1) * att["backward"], rel=1e-12)


# --- renaming every op changes nothing -------------------------------------------------------
def _plan_fields(r):
    return (r.step_s, r.energy_j, r.tokens_per_s, r.flops_per_device_s, dict(r.breakdown_s),
            dict(r.block), dict(r.memory_bytes), r.fits)


PLANS = [
    (LLAMA, "train", ParallelPlan(tp=2, pp=2, dp=2, microbatches=4, sequence_parallel=True,
                                  recompute="selective"), 8, 1024, PlanOptions()),
    (LLAMA, "train", ParallelPlan(tp=2, cp=2, dp=2, zero=1), 4, 1024,
     PlanOptions(tp_overlap=True)),
    (ALIBI, "train", ParallelPlan(tp=2, cp=2, recompute="selective"), 2, 1024, PlanOptions()),
    (LLAMA, "prefill", ParallelPlan(tp=4, cp=2), 2, 2048, PlanOptions()),
    (LLAMA, "decode", ParallelPlan(tp=2, cp=2), 4, None, PlanOptions()),
    (MOE, "train", ParallelPlan(tp=2, ep=2, dp=2, sequence_parallel=True, recompute="full"),
     4, 512, PlanOptions(moe_imbalance=1.25)),
]


@pytest.mark.parametrize("shape,phase,plan,batch,seq,options", PLANS,
                         ids=[f"{s.name}-{ph}-{p.label()}" for s, ph, p, *_ in PLANS])
def test_plan_results_do_not_depend_on_op_names(monkeypatch, shape, phase, plan, batch, seq,
                                                 options):
    dgx = load_cluster(CFG / "dgx_h100.yaml")
    want = evaluate_plan(dgx, shape, plan, phase, batch=batch, seq=seq, options=options)
    graphs = parallel_mod.block_graphs
    monkeypatch.setattr(parallel_mod, "block_graphs",
                        lambda *a, **k: {key: renamed(g) for key, g in graphs(*a, **k).items()})
    got = evaluate_plan(dgx, shape, plan, phase, batch=batch, seq=seq, options=options)
    assert _plan_fields(got) == _plan_fields(want)


@pytest.mark.parametrize("model,attention", [("llama2-7b", None), ("llama2-7b", "unfused"),
                                             ("bloom-176b", "unfused"), ("mixtral-8x7b", None)])
def test_serving_cost_does_not_depend_on_op_names(monkeypatch, model, attention):
    acc = archsim.load("gpu/h100")
    batches = [Batch([(300, 0)], 0, 0, 1), Batch([(128, 1000)], 5, 5 * 700, 6),
               Batch([], 16, 16 * 1500, 16)]
    plain = IterationCost(acc, model, tp=2, attention=attention)
    want = [asdict(plain.cost(b)) for b in batches] + [plain.peaks()]
    # the serving replica builds through the one per-device builder (DeviceBuild.graph)
    build = workloads_parallel.build_transformer
    monkeypatch.setattr(workloads_parallel, "build_transformer",
                        lambda *a, **k: renamed(build(*a, **k)))
    other = IterationCost(acc, model, tp=2, attention=attention)
    assert [asdict(other.cost(b)) for b in batches] + [other.peaks()] == want
    # the attention group is what its tags say (the fused op too)
    w = build(other.one, "decode", 2, None, 64, 2, attention=other.attention)
    groups = serve_cost._groups(renamed(w))
    assert sum(g == "attn" for g in groups.values()) == sum(
        op.role in ATTENTION_CORE_ROLES for op in w.ops())


# --- mapping constraints select by role -------------------------------------------------------
def test_constraint_rules_select_ops_by_role():
    from archsim.mapper.constraints import parse_constraints
    from archsim.workloads.errors import MappingError

    cons = parse_constraints("rules:\n  - role: [qk, attn, av]\n    unit: pim\n")
    w = renamed(build_transformer(LLAMA, "decode", 1, None, 16))
    hit = {op.role for op in w.ops() if cons.for_op(op) is not None}
    assert hit == {"qk", "attn", "av"}
    with pytest.raises(MappingError, match=r"c.yaml:3 rules\[0\].role: expected an op role"):
        parse_constraints("rules:\n  - unit: pim\n    role: attention_core\n", "c.yaml")
