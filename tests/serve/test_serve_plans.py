"""Serving replicas with any plan (TP x PP x EP) and pools on different designs.

Expected values are worked out independently of the serving cost model: whole-model or
half-model ``archsim.evaluate`` of the zoo's graphs (ops selected by their ``block`` tag),
the KV link formula, the pipeline's closed form and the plan machinery's collectives.
"""

from __future__ import annotations

import json

import pytest

import archsim
from archsim.api import device_build
from archsim.arch.cluster import single_node
from archsim.arch.collective import collective, place
from archsim.cli import main as archsim_main
from archsim.serve import PoolSpec, ServeSetup, serve
from archsim.serve.cluster import LINKS, parse_link
from archsim.serve.cost import Batch, IterationCost, kv_bytes_per_token, model_shape
from archsim.serve.replica import Pipeline
from archsim.serve.requests import Request
from archsim.serve.session import parse_plan, run_serving
from archsim.workloads.errors import ConfigError, WorkloadError
from archsim.workloads.graph import Workload
from archsim.workloads.parallel import DeviceBuild
from tests.serve.conftest import MODEL, full_latency

LAYERS = 32          # llama2-7b: 32 blocks, 32 heads of 128, d 4096


def _half(w: Workload, first: bool) -> Workload:
    """The ops of the first (blocks 0-15 and the embedding before them) or the second half
    (blocks 16-31, final norm and head) of a whole-model graph, by their ``block`` tag."""
    keep: set[str] = set()
    seen = False
    for op in w.ops():
        if op.block is not None:
            seen = True
            if (op.block < LAYERS // 2) == first:
                keep.add(op.name)
        elif (not seen) == first:
            keep.add(op.name)
    sub = Workload(name=w.name, phase=w.phase, batch=w.batch, seq=w.seq, context=w.context,
                   parameters=w.parameters, family=w.family, devices=w.devices)
    for op in w.ops():
        if op.name in keep:
            sub.add(op, [p for p in w.predecessors(op.name) if p in keep])
    return sub


def _send_s(acc, tokens: int) -> float:
    """One stage-to-stage hand-off: ``tokens x d`` bf16 activations to the next device."""
    c = single_node(acc, 2)
    return collective(c, "sendrecv", tokens * 4096 * 2.0, place(c, 2, 1)).time_s


def test_pp1_ep1_is_todays_tp_replica_bit_for_bit(a100, costs):
    reqs = [Request(i, 0.05 * i, 200 + 37 * i, 5 + i) for i in range(6)]
    old = serve(a100, ServeSetup(MODEL, PoolSpec(2, 1)), reqs, costs=costs).to_dict()
    new = serve(a100, ServeSetup(MODEL, PoolSpec(2, 1, pp=1, ep=1)), reqs,
                costs=costs).to_dict()
    assert new == old
    a = run_serving(a100, MODEL, tp=2, concurrency=2, isl="128", osl="4", requests=4)
    b = run_serving(a100, MODEL, plan="tp2pp1ep1", concurrency=2, isl="128", osl="4",
                    requests=4)
    assert a.result is not None and b.result is not None
    assert a.result.to_dict() == b.result.to_dict()


def test_pp2_decode_step_is_the_sum_of_its_two_stages(a100):
    # One request alone on a 2-stage replica: TTFT = first half's prefill + the hand-off of
    # the prompt's activations + second half's prefill; every later token = the same sum
    # for a batch-1 decode over the growing cache (whole-model graphs split by block tag).
    p, o = 256, 4
    res = serve(a100, ServeSetup(MODEL, PoolSpec(1, 1, pp=2)), [Request(0, 0.0, p, o)])

    def two_stages(phase: str, tokens: int, **kw) -> float:
        w = archsim.workload(MODEL, phase, **kw)
        return (archsim.evaluate(a100, _half(w, True)).latency_s + _send_s(a100, tokens)
                + archsim.evaluate(a100, _half(w, False)).latency_s)

    prefill = two_stages("prefill", p, seq=p)
    decodes = [two_stages("decode", 1, batch=1, context=p + g - 1) for g in range(1, o)]
    assert res.ttft_s["p50"] == pytest.approx(prefill, rel=0.01)
    assert res.tpot_s["p50"] == pytest.approx(sum(decodes) / (o - 1), rel=0.01)
    assert res.devices == 2
    # the stages halve one device's work: their sum is the one-stage iteration plus the send
    one, two = IterationCost(a100, MODEL, 1), IterationCost(a100, MODEL, 1, pp=2)
    b = Batch([], 3, 3 * 700, 3)
    st = two.stage_costs(b)
    assert len(st) == 2
    assert sum(c.time_s for c in st) == pytest.approx(one.cost(b).time_s
                                                      + _send_s(a100, 3), rel=1e-12)
    assert two.cost(b).time_s == pytest.approx(sum(c.time_s for c in st), rel=1e-12)
    assert full_latency(a100, "decode", batch=1, context=p) < decodes[0]


def test_pipeline_keeps_pp_batches_in_flight():
    # Two batches issued together on stages of a and b seconds: the first leaves at a + b,
    # the second enters stage 0 at a and stage 1 at max(2a, a + b).
    a, b = 0.003, 0.005
    pipe = Pipeline(2)
    assert pipe.run(0.0, 0.0, [a, b]) == pytest.approx(a + b)
    assert pipe.run(0.0, 0.0, [a, b]) == pytest.approx(max(2 * a, a + b) + b)
    # steady state: one batch per slowest stage
    pipe = Pipeline(2)
    ends = [pipe.run(0.0, 0.0, [a, b]) for _ in range(10)]
    assert ends[-1] - ends[-2] == pytest.approx(max(a, b))
    # overhead before the first stage delays only the batch that pays it
    assert Pipeline(3).run(1.0, 0.002, [a, a, a]) == pytest.approx(0.002 + 3 * a)


def test_pp_splits_weights_and_kv_per_device(a100):
    # KV per token on one device: K and V of layers/pp blocks, 32 heads of 128, 2 bytes.
    one = IterationCost(a100, MODEL, 1)
    two = IterationCost(a100, MODEL, 1, pp=2)
    assert one.kv_bytes_per_token == 2 * 32 * 32 * 128 * 2
    assert two.kv_bytes_per_token == 2 * 16 * 32 * 128 * 2
    # the fullest stage holds 16 of the 32 blocks (plus embedding and head, counted on it)
    # one block: q, k, v, o (4 d^2) + SwiGLU (3 d ffn) bf16 parameters (norms < 0.01 %)
    blk = (one.weight_bytes() - two.weight_bytes()) / 16
    assert blk == pytest.approx(2 * (4 * 4096 ** 2 + 3 * 4096 * 11008), rel=1e-3)
    # the pool: each of the 2 virtual engines holds half the replica's blocks
    res = serve(a100, ServeSetup(MODEL, PoolSpec(1, 1, pp=2)), [Request(0, 0.0, 64, 2)])
    blocks = res.deployment["kv_blocks"]
    assert len(blocks) == 2 and blocks[0] == blocks[1]


def test_a_model_too_big_for_one_device_fits_on_a_pipeline():
    # llama3-70b in bf16: ~141 GB of weights, > 0.9 x 80 GB of one H100; 4 stages: ~35 GB
    h100 = archsim.load("gpu/h100")
    with pytest.raises(ConfigError, match="--pp"):
        serve(h100, ServeSetup("llama3-70b", PoolSpec(1, 1)), [Request(0, 0.0, 64, 2)])
    res = serve(h100, ServeSetup("llama3-70b", PoolSpec(1, 1, pp=4)),
                [Request(0, 0.0, 64, 2)])
    assert res.finished == 1 and res.devices == 4


def test_expert_parallel_all_to_alls_priced_on_the_replica():
    # mixtral-8x7b, TP8 EP8: each MoE block adds a dispatch and a combine all-to-all of
    # ceil(T / 8) x top_k 2 x d 4096 bf16 values per device over the 8 devices.
    h100 = archsim.load("gpu/h100")
    ep = IterationCost(h100, "mixtral-8x7b", 8, ep=8)
    t = 512
    c8 = single_node(h100, 8)
    a2a = collective(c8, "alltoall", (t // 8) * 2 * 4096 * 2.0, place(c8, 8, 1)).time_s
    graph = archsim.workload("mixtral-8x7b", "prefill", batch=1, seq=t, tp=8, ep=8)
    block = sum(o.latency_s for o in archsim.evaluate(h100, graph).ops if o.block == 0
                and o.role not in ("qk", "attn", "av", "attention"))
    assert ep._tokens("dense", t).time_s == pytest.approx(block + 2 * a2a, rel=0.02)
    assert a2a > 0


@pytest.mark.parametrize("kw, flag", [
    ({"model": MODEL, "ep": 2}, "--ep"),                       # dense model
    ({"model": "mixtral-8x7b", "tp": 8, "ep": 3}, "--ep"),     # does not divide 8 experts
    ({"model": "mixtral-8x7b", "tp": 2, "ep": 4}, "--ep"),     # does not divide tp
    ({"model": MODEL, "pp": 3}, "--pp"),                       # 32 blocks
    ({"model": MODEL, "cp": 2}, "--cp"),
    ({"model": MODEL, "plan": "tp2xx"}, "--plan"),
    ({"model": MODEL, "plan": "tp2", "tp": 2}, "--plan"),
    ({"model": MODEL, "decode_pp": 2}, "--decode-pp"),
    ({"model": MODEL, "decode_design": "gpu/h100"}, "--decode-design"),
])
def test_bad_plans_name_the_flag(a100, kw, flag):
    with pytest.raises(WorkloadError) as e:
        run_serving(a100, concurrency=1, isl="16", osl="2", requests=1, **kw)
    assert flag in str(e.value)


def test_parse_plan():
    assert parse_plan("tp4pp2") == (4, 2, 1)
    assert parse_plan("tp8 ep8") == (8, 1, 8)
    assert parse_plan("pp2") == (1, 2, 1)
    assert parse_plan("tp4 pp2 mb16") == (4, 2, 1)       # archsim plan's label
    assert parse_plan("single") == (1, 1, 1)
    for bad in ("", "tp4tp2", "tp0", "dp2", "tp2 dp2", "tp4 pp2 zero1", "mb2"):
        with pytest.raises(WorkloadError, match="--plan"):
            parse_plan(bad)


def test_plan_from_archsim_plan_json(tmp_path):
    # the best plan of an `archsim plan --json` output (its first row)
    p = tmp_path / "plan.json"
    p.write_text(json.dumps({"model": "llama3-8b", "plans": [{"plan": "tp4 pp2 mb8"},
                                                             {"plan": "tp8"}]}))
    assert parse_plan(str(p)) == (4, 2, 1)
    for text in ("{}", "not json", json.dumps({"plans": []})):
        p.write_text(text)
        with pytest.raises(WorkloadError, match="plans"):
            parse_plan(str(p))
    with pytest.raises(WorkloadError, match="cannot read"):
        parse_plan(str(tmp_path / "missing.json"))


def test_heterogeneous_kv_transfer_is_bytes_over_bandwidth_plus_latency(a100):
    # Prefill on an H100 (TP1), decode on an A100 (TP1), KV over a 40 GB/s, 20 us link:
    # transfer = 20e-6 + prompt x 2 x 32 layers x 32 heads x 128 x 2 B / 40e9; TTFT is the
    # H100's prefill, the decodes are the A100's.
    h100 = archsim.load("gpu/h100")
    p, o = 512, 4
    link = parse_link("40:20")
    setup = ServeSetup(MODEL, PoolSpec(1, 1), PoolSpec(1, 1, design=a100), link=link)
    res = serve(h100, setup, [Request(0, 0.0, p, o)])
    xfer = 20e-6 + p * 2 * 32 * 32 * 128 * 2 / 40e9
    prefill = full_latency(h100, "prefill", seq=p)
    decodes = sum(full_latency(a100, "decode", batch=1, context=p + g - 1) for g in range(1, o))
    assert res.kv_transfer["mean_s"] == pytest.approx(xfer, rel=1e-9)
    assert res.ttft_s["p50"] == pytest.approx(prefill, rel=0.01)
    assert res.e2e_s["p50"] == pytest.approx(prefill + xfer + decodes, rel=0.01)
    assert res.deployment["decode_design"] == a100.name
    # the decode pool's own plan: TP2 pairs carry half each (min(1, 2) = 1 pair here)
    setup2 = ServeSetup(MODEL, PoolSpec(1, 2), PoolSpec(1, 2, pp=2, design=a100), link=link)
    res2 = serve(h100, setup2, [Request(0, 0.0, p, o)])
    assert res2.kv_transfer["mean_s"] == pytest.approx(
        20e-6 + p * 2 * 32 * 32 * 128 * 2 / 2 / 40e9, rel=1e-9)
    assert res2.devices == 2 + 4


def test_a_pool_on_the_same_design_is_todays_disaggregation(a100):
    kw = dict(decode_replicas=1, decode_tp=1, concurrency=2, isl="256", osl="6", requests=4)
    old = run_serving(a100, MODEL, kv_link="nvlink3", **kw)
    new = run_serving(a100, MODEL, kv_link="nvlink3", decode_design="gpu/a100", **kw)
    assert old.result is not None and new.result is not None
    assert new.result.to_dict() == old.result.to_dict()
    # the default link: NVLink within a design, the scale-out NIC between two
    dflt = run_serving(a100, MODEL, decode_design="gpu/a100", **kw)
    assert dflt.result is not None and dflt.result.deployment["link"] == "nvlink4"
    other = run_serving("gpu/h100", MODEL, decode_design=a100, **kw)
    assert other.result is not None
    assert other.result.deployment["link"] == LINKS["ib-ndr"].name


def test_cli_plan_and_decode_design_reach_the_deployment(capsys):
    rc = archsim_main(["serve", "gpu/a100", "--model", MODEL, "--plan", "tp1pp2",
                       "--decode-replicas", "1", "--decode-plan", "tp2", "--decode-design",
                       "gpu/h100", "--concurrency", "1", "--isl", "64", "--osl", "3",
                       "--json"])
    d = json.loads(capsys.readouterr().out)
    dep = d["deployment"]
    assert rc == 0
    assert (dep["tp"], dep["pp"], dep["decode_tp"], dep["decode_pp"]) == (1, 2, 2, 1)
    assert dep["decode_design"] == "h100" and dep["link"] == "ib-ndr"
    assert d["devices"] == 2 + 2
    assert "TP1 PP2" in dep["summary"] and "TP2 on h100" in dep["summary"]


def _small_deepseek(tmp_path) -> str:
    """A 4-block DeepSeek-V3-shaped config (MLA, the first block dense, then MoE blocks of
    16 routed experts, top 2, one shared), small enough to evaluate whole."""
    cfg = json.loads(open("tests/data/hf_moe/deepseek-v3.json").read())
    cfg.update({"num_hidden_layers": 4, "first_k_dense_replace": 1, "hidden_size": 1024,
                "intermediate_size": 2816, "moe_intermediate_size": 256,
                "n_routed_experts": 16, "num_experts_per_tok": 2, "n_group": 1,
                "topk_group": 1, "num_attention_heads": 8, "num_key_value_heads": 8,
                "q_lora_rank": 384, "kv_lora_rank": 128, "qk_nope_head_dim": 64,
                "qk_rope_head_dim": 32, "v_head_dim": 64, "vocab_size": 32000,
                "max_position_embeddings": 4096})
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return str(p)


def test_mla_caches_one_latent_per_layer():
    # DeepSeek-V3: 61 layers x (kv_lora_rank 512 + rope 64) x 2 B, whole on every TP device
    s = model_shape("deepseek-v3")
    assert kv_bytes_per_token(s, DeviceBuild(), 8) == 61 * 576 * 2
    assert kv_bytes_per_token(s, DeviceBuild(), 1) == 61 * 576 * 2


def test_dense_then_moe_blocks_are_each_their_own_kind(tmp_path):
    # a model whose first block is dense and the other three MoE: one request alone is the
    # whole model's prefill and decodes (single-device builder), its weights per device are
    # the whole graph's resident bytes, and a 2-stage pipeline puts the dense block first
    h100 = archsim.load("gpu/h100")
    model = _small_deepseek(tmp_path)
    s = model_shape(model)
    build = device_build(h100)
    p, o = 256, 4
    res = serve(h100, ServeSetup(model, PoolSpec(1, 1)), [Request(0, 0.0, p, o)])
    prefill = archsim.evaluate(h100, build.graph(s, "prefill", 1, p, None, 1)).latency_s
    decodes = [archsim.evaluate(h100, build.graph(s, "decode", 1, None, p + g - 1, 1)).latency_s
               for g in range(1, o)]
    assert res.ttft_s["p50"] == pytest.approx(prefill, rel=0.01)
    # 6 %: a known gap of MLA decode (docs/serving.md "Gaps"): the cost model prices a
    # block's projections on the prefill graph, which expands K/V, while MLA's decode graph
    # absorbs the up-projections; an all-dense and an all-MoE variant of this model show the
    # same ~23 us per step
    assert res.tpot_s["p50"] == pytest.approx(sum(decodes) / (o - 1), rel=0.06)
    cost = IterationCost(h100, model, 1)
    whole = build.graph(s, "prefill", 1, 1, None, 1).resident_bytes()
    assert cost.weight_bytes() == pytest.approx(whole, rel=1e-9)
    two = IterationCost(h100, model, 2, pp=2, ep=2)
    assert two._stage_blocks(0) == [("", 1), ("moe", 1)]
    assert two._stage_blocks(1) == [("moe", 2)]
    # the expert all-to-alls ride on the MoE blocks only
    t = 64
    assert two._tokens("dense", t, "moe").time_s > two._eval("dense", "prefill", 1, t, None,
                                                             "moe").time_s
    assert two._tokens("dense", t).time_s == two._eval("dense", "prefill", 1, t, None).time_s


def test_kv_hand_off_bytes_follow_the_kv_format():
    # fp8 KV cache: 1 byte per element, so the hand-off moves half the 16-bit bytes
    h100 = archsim.load("gpu/h100")
    p, o = 512, 2
    link = parse_link("40:20")
    res = {}
    for fmt, nbytes in ((None, 2), ("fp8_e4m3", 1)):
        setup = ServeSetup(MODEL, PoolSpec(1, 1), PoolSpec(1, 1), link=link,
                           build=device_build(h100, kv_format=fmt))
        res[fmt] = serve(h100, setup, [Request(0, 0.0, p, o)])
        assert res[fmt].kv_transfer["bytes"] == p * 2 * 32 * 32 * 128 * nbytes
        assert res[fmt].kv_transfer["mean_s"] == pytest.approx(
            20e-6 + p * 2 * 32 * 32 * 128 * nbytes / 40e9, rel=1e-9)
