"""KV-cache techniques (archsim.workloads.kvtech): each switch moves the result by the amount
its mechanism gives in closed form, and is refused where the model cannot use it.

Expected values are worked out here from the model's shape (llama2-7b: 32 layers,
d_model 4096, 32 heads of 128, multi-head attention) and the block arithmetic, never
copied from the simulator's output.
"""

from __future__ import annotations

import math

import pytest

import archsim
from archsim.cli import main
from archsim.serve import KVTechniques, PoolSpec, SchedulerSpec, ServeSetup, serve
from archsim.serve.cost import Batch, IterationCost, model_shape
from archsim.serve.replica import Replica, State
from archsim.serve.requests import Request, load_trace
from archsim.workloads.errors import WorkloadError
from archsim.workloads.kvtech import offload_exposed_s, prefix_hit_tokens
from tests.serve.conftest import MODEL

L, D, KV, HD = 32, 4096, 32, 128          # llama2-7b


@pytest.fixture(scope="module")
def base(a100):
    return IterationCost(a100, MODEL, 1)


# ---- prefix caching -----------------------------------------------------------------------

def test_prefix_hit_tokens_closed_form():
    assert prefix_hit_tokens(1000, 0.5) == 500
    assert prefix_hit_tokens(1000, 0.0) == 0
    assert prefix_hit_tokens(3, 0.99) == 2           # the last prompt token is computed
    assert prefix_hit_tokens(1, 0.5) == 0


@pytest.mark.parametrize("h", [0.25, 0.5, 0.75])
def test_prefix_hit_scales_prefill_flops_by_one_minus_h(base, h):
    # A prompt of P tokens with h P cached: the iteration computes (1 - h) P rows of every
    # linear layer and (1 - h) P queries over P keys: every block op's FLOPs x (1 - h); the
    # LM head (one row, the emitting token) is the same.
    p = 1024
    hit = prefix_hit_tokens(p, h)
    head = base._tokens("head", 1).flops
    full = base.cost(Batch([(p, 0)], 0, 0, 1)).flops - head
    part = base.cost(Batch([(p - hit, hit)], 0, 0, 1)).flops - head
    assert part == pytest.approx((1 - h) * full, rel=1e-9)


def test_prefix_hit_in_a_run_skips_prefill_and_shares_blocks(a100, costs):
    # One request, prompt 1024 (64 blocks of 16), output 1: the hit run computes half the
    # prefill, and holds 64 - 512 / 16 = 32 blocks of its own (the prefix's are shared).
    p = 1024
    raw0: dict = {}
    raw1: dict = {}
    r0 = serve(a100, ServeSetup(MODEL), [Request(0, 0.0, p, 1)], costs=costs, raw_out=raw0)
    r1 = serve(a100, ServeSetup(MODEL, kv=KVTechniques(prefix_hit_rate=0.5)),
               [Request(0, 0.0, p, 1)], raw_out=raw1)
    c = raw0["sim"].replicas[0].cost
    head = c._tokens("head", 1).flops
    f0 = raw0["sim"].replicas[0].flops - head
    f1 = raw1["sim"].replicas[0].flops - head
    assert f1 == pytest.approx(0.5 * f0, rel=1e-9)
    assert raw0["sim"].replicas[0].kv.peak == 64
    assert raw1["sim"].replicas[0].kv.peak == 64 - 512 // 16
    assert r1.ttft_s["p50"] < r0.ttft_s["p50"]


# ---- K/V rematerialisation ----------------------------------------------------------------

def test_remat_caches_x_instead_of_k_and_v(a100, base):
    rm = IterationCost(a100, MODEL, 1, kv=KVTechniques(remat=True))
    assert base.kv_bytes_per_token == 2 * L * KV * HD * 2          # K and V, 16-bit
    assert rm.kv_bytes_per_token == L * D * 2                       # X, 16-bit: half


@pytest.mark.parametrize("batch,ctx", [(1, 2047), (8, 1000)])
def test_remat_adds_the_kv_projection_per_cached_token(a100, base, batch, ctx):
    # Every decode step recomputes K and V of each cached key in every layer:
    # 2 x d_model x (2 x kv_heads x head_dim) FLOPs per key and layer.
    rm = IterationCost(a100, MODEL, 1, kv=KVTechniques(remat=True))
    keys = batch * (ctx + 1)
    b = Batch([], batch, keys, batch)
    extra = rm.cost(b).flops - base.cost(b).flops
    assert extra == pytest.approx(L * keys * 2 * D * 2 * KV * HD, rel=1e-6)
    assert rm.cost(b).time_s > base.cost(b).time_s


@pytest.mark.parametrize("model,tp,why", [("llama2-70b", 1, "not smaller"),
                                          ("llama2-7b", 4, "not smaller"),
                                          ("deepseek-v3", 1, "latent")])
def test_remat_refused_where_x_is_not_smaller(model, tp, why):
    with pytest.raises(WorkloadError, match=why) as e:
        KVTechniques(remat=True).check(model_shape(model), tp, 16)
    assert e.value.problems[0].path == "--kv-remat"


# ---- top-k block attention ----------------------------------------------------------------

def _replica(cost, kv_total=10_000, block_size=16):
    return Replica(0, cost, kv_total, SchedulerSpec(block_size=block_size))


def test_topk_caps_keys_and_scores_every_block(a100):
    # Two decodes with 999 and 99 tokens cached (attending 1000 and 100 keys, as the
    # step adds its own), k = 4 blocks of 16: keys min(1000, 64) + min(100, 64) = 128;
    # the selection scores ceil(1000 / 16) + ceil(100 / 16) = 63 + 7 = 70 blocks.
    cost = IterationCost(a100, MODEL, 1, kv=KVTechniques(topk_blocks=4))
    rep = _replica(cost)
    for rid, ctx in enumerate((1000, 100)):
        s = State(Request(rid, 0.0, ctx, 10))
        s.done = s.target
        s.g = 0
        rep.admit(s, reserve_output=False)
        rep.running.append(s)
    dec, _ = rep.decodes()
    b, c = rep.run([], dec)
    assert b.decode_keys == 64 + 64
    assert b.select_keys == math.ceil(1000 / 16) + math.ceil(100 / 16)
    # at long context the step reads fewer bytes and takes less time: 16 decodes over 4000
    # keys, k = 16 blocks (256 keys) plus 250 scored blocks each
    full = IterationCost(a100, MODEL, 1).cost(Batch([], 16, 16 * 4000, 16))
    top = cost.cost(Batch([], 16, 16 * 256, 16, 16 * 250))
    assert top.dram_bytes < full.dram_bytes and top.time_s < full.time_s


def test_topk_refused_when_it_covers_the_context():
    with pytest.raises(WorkloadError, match="whole 4096-token context") as e:
        KVTechniques(topk_blocks=256).check(model_shape(MODEL), 1, 16)
    assert e.value.problems[0].path == "--topk-blocks"


# ---- KV offload ---------------------------------------------------------------------------

def test_offload_exposed_time_closed_form():
    # 6.4 GB over 64 GB/s = 0.1 s: behind 0.04 s of compute 0.06 s shows; behind 0.2 s none.
    assert offload_exposed_s(6.4e9, 64.0, 0.04) == pytest.approx(0.06)
    assert offload_exposed_s(6.4e9, 64.0, 0.2) == 0.0
    assert offload_exposed_s(0.0, 64.0, 0.0) == 0.0


def test_offload_adds_host_blocks_and_streams_them(a100):
    # Host blocks = floor(GB x 1e9 / (block x KV bytes per token)); a decode iteration with
    # u blocks used beyond the device's d streams (u - d) blocks back at 64 GB/s.
    gb = 8.0
    setup = ServeSetup(MODEL, PoolSpec(1, 1, SchedulerSpec(block_size=16)),
                       kv=KVTechniques(offload_gb=gb))
    base = ServeSetup(MODEL, PoolSpec(1, 1, SchedulerSpec(block_size=16)))
    raw: dict = {}
    raw0: dict = {}
    reqs = [Request(i, 0.0, 2000, 4) for i in range(4)]
    serve(a100, base, reqs, raw_out=raw0)
    serve(a100, setup, reqs, raw_out=raw)
    rep0 = raw0["sim"].replicas[0]
    rep = raw["sim"].replicas[0]
    per_token = 2 * L * KV * HD * 2
    host = int(gb * 1e9 // (16 * per_token))
    assert rep.device_blocks == rep0.kv.total
    assert rep.kv.total == rep0.kv.total + host
    rep.kv.used = rep.device_blocks + 100
    assert rep.offload_bytes() == 100 * 16 * per_token


def test_offload_iteration_time_is_compute_plus_exposed(a100):
    # A design whose memory holds the weights and about 40 blocks: a 2000-token prompt (125
    # blocks) fits only with host blocks; each decode step's time is its compute plus
    # max(0, host bytes / 64 GB/s - compute).
    acc = archsim.load("gpu/a100")
    setup = ServeSetup(MODEL, memory_fraction=0.17, kv=KVTechniques(offload_gb=4.0))
    raw: dict = {}
    res = serve(acc, setup, [Request(0, 0.0, 2000, 3)], raw_out=raw)
    rep = raw["sim"].replicas[0]
    assert res.finished == 1 and rep.device_blocks < 126
    per_block = 16 * 2 * L * KV * HD * 2
    decodes = [t for t in raw["timeline"] if t[4] == 1]
    assert len(decodes) == 2
    for g, (_, _, dt, _, _, used, _) in enumerate(decodes, start=1):
        compute = rep.cost.cost(Batch([], 1, 2000 + g, 1)).time_s
        exposed = max(0.0, (used - rep.device_blocks) * per_block / 64e9 - compute)
        assert dt == pytest.approx(compute + exposed, rel=1e-9)
        assert exposed > 0


def test_offload_refuses_a_negative_size():
    with pytest.raises(WorkloadError, match="GB") as e:
        KVTechniques(offload_gb=-1.0).check(model_shape(MODEL), 1, 16)
    assert e.value.problems[0].path == "--kv-offload-gb"


# ---- the command line ---------------------------------------------------------------------

@pytest.mark.parametrize("flags,key", [(["--prefix-hit-rate", "1"], "--prefix-hit-rate"),
                                       (["--kv-remat", "--tp", "4"], "--kv-remat"),
                                       (["--topk-blocks", "-1"], "--topk-blocks")])
def test_cli_refuses_with_one_line(flags, key, capsys):
    rc = main(["serve", "gpu/a100", "--model", MODEL, "--rate", "1", "--duration", "1",
               "--quiet", *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and key in err[0]


# ---- prefix groups from a trace -----------------------------------------------------------

def test_trace_prefix_groups_share_and_skip(a100, costs, tmp_path):
    # Four requests at t = 0, prompt 1024, output 1, all starting with the 512-token prefix
    # "sys" (32 blocks of 16). The first arrival starts alone and computes all 1024 tokens;
    # the prefix stays cached, so the other three compute 512 each: 1024 + 3 x 512 prefill
    # tokens instead of 4096. The cache holds the group's 32 blocks once plus 32 of each
    # running request's own: peak 32 + 3 x 32 (not 3 x 64); at the end only the cached
    # prefix is held, evictable (no user).
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens,prefix_group,prefix_tokens\n"
                 + "".join("0,1024,1,sys,512\n" for _ in range(4)))
    reqs = load_trace(f)
    assert reqs[0].prefix_group == "sys" and reqs[0].prefix_tokens == 512
    raw: dict = {}
    res = serve(a100, ServeSetup(MODEL), reqs, costs=costs, raw_out=raw)
    rep = raw["sim"].replicas[0]
    assert res.finished == 4
    assert sum(t[3] for t in raw["timeline"]) == 1024 + 3 * 512
    assert rep.kv.peak == 32 + 3 * 32
    assert rep.kv.used == 32 and rep.prefixes == {"sys": [32, 0]}


def test_an_unused_cached_prefix_is_evicted_when_blocks_run_out(a100):
    # A replica of 100 blocks holding an unused 32-block prefix: a request needing 80 blocks
    # (1280 tokens) evicts it; one needing 101 cannot be admitted at all.
    rep = Replica(0, IterationCost(a100, MODEL, 1), 100, SchedulerSpec())
    rep.prefixes["sys"] = [32, 0]
    assert rep.kv.alloc(32)
    s = State(Request(0, 0.0, 1280, 4))
    assert rep.admit(s, reserve_output=False)
    assert rep.prefixes == {} and rep.kv.used == 80
    big = State(Request(1, 0.0, 1616, 4))
    assert not rep.admit(big, reserve_output=False) and rep.kv.used == 80


@pytest.mark.parametrize("row,msg", [("0,100,1,sys,\n", "come together"),
                                     ("0,100,1,,50\n", "come together"),
                                     ("0,100,1,sys,101\n", "at most the prompt's 100")])
def test_trace_prefix_columns_bad(tmp_path, row, msg):
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens,prefix_group,prefix_tokens\n" + row)
    with pytest.raises(WorkloadError, match=msg) as e:
        load_trace(f)
    assert e.value.problems[0].line == 2


def test_quest_check_prices_what_topk_blocks_prices():
    """The Quest comparison (archsim/validation/kv_techniques.py) is the attention part of a
    ``--topk-blocks`` decode block: with budget B = k x 16 keys and a context of n keys, the
    block's attention = decode attention over B keys + the selection pass over n / 16 keys.
    Its bytes are the closed form 1 / (1/16 + B/n) of the full attention's (a min/max pair per
    16-token page, one key + value each): 8x at 32K / 2048, 16/9 at 8K / 4096."""
    from archsim.validation.kv_techniques import _LONGCHAT, quest_attention_speedup

    rtx = archsim.load("gpu/rtx4090")
    c = IterationCost(rtx, str(_LONGCHAT), 1, attention="fused")
    dense = c._tokens("dense", 1).time_s
    full = c._block(Batch([], 1, 32768, 1)).time_s - dense
    top = c._block(Batch([], 1, 2048, 1, select_keys=32768 // 16)).time_s - dense
    t, b = quest_attention_speedup(archsim, "gpu/rtx4090", 32768, 2048)
    assert t == pytest.approx(full / top, rel=1e-9)
    assert b == pytest.approx(1 / (1 / 16 + 2048 / 32768), rel=1e-3)
    assert quest_attention_speedup(archsim, "gpu/rtx4090", 8192, 4096)[1] == pytest.approx(
        16 / 9, rel=1e-3)
    assert 1 < t < b        # each kernel's fixed cost keeps time above the bytes' share
def test_a_chunk_after_cached_tokens_costs_its_causal_pairs():
    """A causal fused kernel (gpu/h100 runs attention fused): a 512-token chunk after 1536
    cached tokens scores (2048 x 2049 - 1536 x 1537) / 2 of the 2048-token prompt's
    2048 x 2049 / 2 (query, key) pairs (both priced from the 2048 grid point); dense scores
    (unfused) scale by c s / s^2 = 512 x 2048 / 2048^2."""
    h100 = archsim.load("gpu/h100")
    fused = IterationCost(h100, "llama2-7b", 1)
    assert fused.attention == "fused"
    whole = fused.chunk_attention(2048, 0).time_s
    assert fused.chunk_attention(512, 1536).time_s / whole == pytest.approx(
        (2048 * 2049 - 1536 * 1537) / (2048 * 2049), rel=1e-12)
    dense = IterationCost(h100, "llama2-7b", 1, attention="unfused")
    assert dense.chunk_attention(512, 1536).time_s / dense.chunk_attention(2048, 0).time_s \
        == pytest.approx(512 / 2048, rel=1e-12)
