"""Issue 26 item 5: fused MoE as one op (``workloads.ops.FusedMoE``, ``arch/gpu/moe.py``) —
the routing's per-expert loads, the grouped-GEMM mechanism's bounds, the op in the
transformer graph, and the fit on shared/reference/kernels_h100/moe.csv.gz (table
moe/vllm/0.24.0; README there: H100 only)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

import archsim.calibration as cal_mod
from archsim import silicon
from archsim.api import device_build, load
from archsim.api import workload as build_workload
from archsim.arch.gpu.moe import block_m, fused_moe_time
from archsim.kernel_tables import kernel_class, moe_op, shape_half
from archsim.serve.session import run_serving
from archsim.validation.serving_h100 import Deployment, moe_routing
from archsim.workloads.errors import WorkloadError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import FusedMoE, moe_backend
from archsim.workloads.parallel import ParallelPlan, layer_comms
from archsim.workloads.routing import device_loads, parse_routing
from archsim.workloads.zoo import transformer_shape
from tests.gpu.gpu_helpers import SHARED_REF

MOE_CSV = SHARED_REF / "kernels_h100" / "moe.csv.gz"
needs_tables = pytest.mark.skipif(not MOE_CSV.exists(), reason="../shared/ not present")
BF16, FP8 = FORMATS["bf16"], FORMATS["fp8_e4m3"]


def _moe(**kw: object) -> FusedMoE:
    base = {"name": "m", "tokens": 1, "hidden": 4096, "width": 2048, "experts": 256,
            "top_k": 8, "a_format": BF16, "w_format": BF16}
    base.update(kw)
    return FusedMoE(**base)  # type: ignore[arg-type]


def _h100():
    return load("gpu/h100").units[0]


# ---- routing ---------------------------------------------------------------------------
def test_balanced_loads_by_hand() -> None:
    # 64 tokens x top-8 over 256 experts: 2 each; ep 4: 64 local experts, still 2 each
    assert device_loads(64, 256, 8, 1, 0.0) == (2.0,) * 256
    assert device_loads(64, 256, 8, 4, 0.0) == (2.0,) * 64
    # 1 token x top-8 = 8 pairs spread evenly over 8 devices: one expert hit per device
    assert device_loads(1, 256, 8, 8, 0.0) == (1.0,)
    # 3 tokens x top-2 = 6 pairs on 2 devices: 3 experts hit on each
    assert device_loads(3, 64, 2, 2, 0.0) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize(("tokens", "experts", "top_k"), [(1, 256, 8), (16384, 256, 8),
                                                          (37, 128, 6), (4, 8, 2)])
@pytest.mark.parametrize("alpha", [1.01, 1.2, 2.5])
def test_power_law_keeps_every_pair_and_skews(tokens: int, experts: int, top_k: int,
                                              alpha: float) -> None:
    """On one device the loads sum to tokens x top_k exactly; the busiest expert holds at
    least the mean; the busiest of 4 devices holds at least a quarter of the pairs."""
    loads = device_loads(tokens, experts, top_k, 1, alpha)
    assert sum(loads) == tokens * top_k
    assert max(loads) >= tokens * top_k / experts
    busiest = device_loads(tokens, experts, top_k, 4, alpha)
    assert sum(busiest) >= tokens * top_k / 4
    assert len(busiest) <= experts // 4


def test_heavier_tail_hits_fewer_experts() -> None:
    """At 64 tokens x top-8 over 256 experts, balanced routing hits all 256; a power law
    concentrates the same 512 pairs on fewer experts, alpha 1.01 more so than 2.5."""
    hit = {a: len(device_loads(64, 256, 8, 1, a)) for a in (0.0, 2.5, 1.01)}
    assert hit[0.0] == 256 and hit[1.01] < 256


@pytest.mark.parametrize("alpha", [1.01, 1.2])
@pytest.mark.parametrize(("tokens", "experts", "top_k"), [(1, 256, 8), (2, 128, 8),
                                                          (4, 256, 8), (1, 512, 22)])
def test_few_pairs_land_on_distinct_experts(tokens: int, experts: int, top_k: int,
                                            alpha: float) -> None:
    """With at most experts / 8 pairs every expected share of the power law on [0.01, 2] is
    below one pair (the top expert's share is 2 / sum < 1), so largest-remainder rounding gives
    each pair its own expert: the same experts hit as balanced routing (the table's
    power-law rows at these batches take the balanced rows' time: median ratio 0.98-1.00)."""
    loads = device_loads(tokens, experts, top_k, 1, alpha)
    assert loads == (1.0,) * (tokens * top_k)


@pytest.mark.parametrize(("tokens", "experts", "top_k"), [(3, 16, 4), (40, 8, 2), (6, 64, 8)])
def test_power_law_load_never_above_the_tokens(tokens: int, experts: int, top_k: int) -> None:
    """A token's top-k experts are distinct, so no expert receives more than ``tokens`` pairs,
    however heavy the tail; the pairs still all land."""
    loads = device_loads(tokens, experts, top_k, 1, 1.01)
    assert max(loads) <= tokens and sum(loads) == tokens * top_k


@pytest.mark.parametrize("bad", ["zipf", "power_law", "power_law:x", "power_law:1",
                                 "power_law:-2", "power_law:nan", ""])
def test_bad_routing_names_the_key(bad: str) -> None:
    with pytest.raises(WorkloadError, match="--moe-routing.*balanced.*power_law:ALPHA"):
        parse_routing(bad)


def test_bad_fused_moe_fields() -> None:
    with pytest.raises(WorkloadError, match="backend must be one of triton, cutlass, marlin"):
        _moe(backend="flashinfer")
    with pytest.raises(WorkloadError, match="ep .3. must divide experts"):
        _moe(ep=3)


# ---- mechanism -------------------------------------------------------------------------
def test_decode_streams_the_experts_hit_never_faster_than_hbm() -> None:
    """One token, top-8 of 256 experts (4096 x 2048, bf16): the call reads 8 experts' gate,
    up and down weights, 8 x 3 x 4096 x 2048 x 2 B = 402.7 MB; at H100's sustained 3.015
    TB/s that is 133.6 us, a floor. Expert parallelism over 8 devices: one expert each."""
    u = _h100()
    s = u.spec
    op = _moe()
    assert op.weight_bytes() == 8 * 3 * 4096 * 2048 * 2
    floor = op.weight_bytes() / s.memory.sustained_bytes_per_s
    t = fused_moe_time(s, op)
    assert t.time_s >= floor and t.experts_hit == 8
    assert u.estimate(op).cycles >= u.roofline_cycles(op)
    ep8 = fused_moe_time(s, _moe(ep=8))
    assert ep8.experts_hit == 1 and ep8.time_s < t.time_s
    assert math.isclose(_moe(ep=8).weight_bytes(), op.weight_bytes() / 8)


def test_more_tokens_never_faster_and_zero_token_experts_free() -> None:
    s = _h100().spec
    times = [fused_moe_time(s, _moe(tokens=t)).time_s for t in (1, 2, 8, 64, 512, 4096)]
    assert times == sorted(times)
    # 256 experts on 128 devices, 1 token: 8 pairs land on 8 of 128 devices; the busiest
    # device holds one expert hit of its 2 (the idle one costs no tile and no weight read)
    t = fused_moe_time(s, _moe(ep=128))
    assert t.experts_hit == 1


def test_prefill_is_mma_bound_and_fp8_halves_the_weight_stream() -> None:
    """16384 tokens x top-8 over 256 experts: 512 tokens per expert, 2 x 131072 x 3 x 4096 x
    2048 = 6.6 PFLOP of MMAs on 1070 TFLOP/s (132 SMs x 2048 MACs x 1.98 GHz) >= 6.2 ms;
    at one token, fp8 weights halve the bytes the call streams."""
    s = _h100().spec
    big = fused_moe_time(s, _moe(tokens=16384))
    assert big.time_s >= 2 * 131072 * 3 * 4096 * 2048 / (132 * 2048 * 2 * 1.98e9)
    assert big.compute_s > big.stream_s
    f8 = fused_moe_time(s, _moe(w_format=FP8, backend="cutlass", fp8_block=True))
    b16 = fused_moe_time(s, _moe())
    assert f8.read_b < 0.6 * b16.read_b


def test_cutlass_per_tensor_partial_tile_streams_the_experts_weights() -> None:
    """CUTLASS per-tensor fp8 (``partial_tile_gbps``): balanced routing of 6144 tokens x top-8
    over 256 experts = 192 tokens per expert = one full 128-row tile (its MMAs) + one partial
    tile that streams the expert's weights (N x K fp8 bytes) at partial_tile_gbps; 4096
    tokens = 128 per expert = one full tile only. By hand for the gate+up GEMM (N = 2 x 2048,
    K = 4096) and the down GEMM (N = 4096, K = 2048): each expert's two matrices hold
    3 x 4096 x 2048 bytes."""
    s = _h100().spec
    k = s.fused_moe.cutlass_fp8
    mma = s.tc_rate_per_sm("fp8_e4m3") * s.tensor_clock_mhz * 1e6
    # the full tiles' FMAs (256 experts x 128 rows x 3 x 4096 x 2048) at the FMA rate
    full = 256 * 128 * 3 * 4096 * 2048 / (s.sm_count * mma * k.mma_efficiency)
    part = 256 * 3 * 4096 * 2048 / (k.partial_tile_gbps * 1e9)

    def op(tokens: int) -> FusedMoE:
        return _moe(tokens=tokens, w_format=FP8, a_format=FP8, backend="cutlass",
                    fp8_block=False)
    assert fused_moe_time(s, op(4096)).compute_s == pytest.approx(full, rel=1e-9)
    assert fused_moe_time(s, op(6144)).compute_s == pytest.approx(full + part, rel=1e-9)
    # the block-fp8 CUTLASS kernel has no such rate: its partial tile is a padded full one
    blk = _moe(tokens=6144, w_format=FP8, a_format=FP8, backend="cutlass", fp8_block=True)
    kb = s.fused_moe.cutlass_fp8_block
    assert kb.partial_tile_gbps is None
    assert fused_moe_time(s, blk).compute_s == pytest.approx(
        2 * full * k.mma_efficiency / kb.mma_efficiency, rel=1e-9)


@pytest.mark.parametrize(("tokens", "bm"), [(1, 8), (64, 8), (512, 16), (1024, 32),
                                              (2048, 48), (16384, 64)])
def test_marlin_block_m_by_hand(tokens: int, bm: int) -> None:
    """vLLM's Marlin MoE picks the first block M of 8, 16, 32, 48, 64 whose mean tokens per
    local expert over it is below 0.9 (else 64): 384 experts x top-8, mean = tokens x 8 / 384:
    1 -> 0.02 (8); 64 -> 1.33 (/8 = 0.17: 8); 512 -> 10.7 (/8 = 1.33, /16 = 0.67: 16);
    1024 -> 21.3 (/16 = 1.33, /32 = 0.67: 32); 2048 -> 42.7 (/32 = 1.33, /48 = 0.889: 48);
    16384 -> 341 (none: 64)."""
    k = _h100().spec.fused_moe.marlin_int4
    op = _moe(tokens=tokens, hidden=7168, width=2048, experts=384, top_k=8, backend="marlin",
              w_format=FORMATS["int4"])
    assert block_m(k, op) == bm


@pytest.mark.parametrize(("tokens", "bm"), [(1, 16), (160, 16), (768, 32), (1536, 64),
                                              (3072, 128), (16384, 128)])
def test_triton_mxfp4_block_m_by_hand(tokens: int, bm: int) -> None:
    """triton_kernels' routing pads each expert to a power of two of floor(tokens x top_k /
    experts), clamped to 16..128: gpt-oss-120b (128 experts, top-4): 1 -> max(1, 0) = 1
    (16); 160 -> 5 -> 8 (16); 768 -> 24 -> 32; 1536 -> 48 -> 64; 3072 -> 96 -> 128;
    16384 -> 512 -> 128 (the cap)."""
    k = _h100().spec.fused_moe.triton_mxfp4
    op = _moe(tokens=tokens, hidden=2880, width=2880, experts=128, top_k=4,
              w_format=FORMATS["mxfp4"])
    assert block_m(k, op) == bm


def test_weight_only_dequantises_every_m_tile() -> None:
    """One expert (top-1 of 1), 4096 tokens, gpt-oss's 2880 x 2880 MXFP4 matrices: block M
    128, 32 tiles per GEMM; the grouped GEMMs are MMA + dequant bound, so their compute time
    is by hand 32 x 128 x (5760 + 2880) x 2880 FMAs at SMs x FMA rate x mma_efficiency plus
    32 x (5760 + 2880) x 2880 weights dequantised at SMs x dequant_per_clock x clock (each
    M tile dequantises its weights: the rows of a tile share them). The activations stay
    bf16 (2 B), the weights stream at 4.25 bits."""
    s = _h100().spec
    k = s.fused_moe.triton_mxfp4
    op = _moe(tokens=4096, hidden=2880, width=2880, experts=1, top_k=1,
              w_format=FORMATS["mxfp4"])
    clock = s.tensor_clock_mhz * 1e6
    fma = s.tc_rate_per_sm("fp16") * clock
    mma = 32 * 128 * (5760 + 2880) * 2880 / (s.sm_count * fma * k.mma_efficiency)
    deq = 32 * (5760 + 2880) * 2880 / (s.sm_count * k.dequant_per_clock * clock)
    t = fused_moe_time(s, op)
    assert t.compute_s == pytest.approx(mma + deq, rel=1e-9)
    weights = 3 * 2880 * 2880 * 4.25 / 8
    assert t.read_b >= weights + 4096 * (2880 + 2880) * 2.0


@pytest.mark.parametrize(("tokens", "ep", "steps"), [(16, 4, False), (17, 4, True),
                                                     (512, 128, True), (512, 1, False)])
def test_triton_mxfp4_sort_step_under_ep(tokens: int, ep: int, steps: bool) -> None:
    """``sort_us`` is paid once per call above 16 tokens (triton_kernels' multi-kernel sort)
    under expert parallelism, never at EP 1 or at <= 16 tokens: the call with and without
    it differs by exactly sort_us or by nothing."""
    s = _h100().spec
    fm = s.fused_moe
    k = fm.triton_mxfp4
    assert k.sort_us > 0
    no_sort = replace(s, fused_moe=replace(fm, triton_mxfp4=replace(k, sort_us=0.0)))
    op = _moe(tokens=tokens, hidden=2880, width=2880, experts=128, top_k=4, ep=ep,
              w_format=FORMATS["mxfp4"])
    diff = fused_moe_time(s, op).time_s - fused_moe_time(no_sort, op).time_s
    assert diff == pytest.approx(k.sort_us * 1e-6 if steps else 0.0, abs=1e-12)


def test_every_token_moves_its_hidden_row() -> None:
    """``token_hidden_b``: every token, whatever its experts, moves token_hidden_b bytes per
    hidden element (the input's quantisation, the combine's output row). Balanced 4096 and
    8192 tokens x top-8 over 256 experts (4096 x 2048, CUTLASS block fp8) hit the same 256
    experts, so their fixed parts differ by 4096 tokens x (token_ns + token_hidden_b x hidden
    / BW + 8 pairs x (per-pair + per-local-pair bytes) / BW), by hand."""
    s = _h100().spec
    k = s.fused_moe.cutlass_fp8_block
    assert k.token_hidden_b > 0

    def fixed(tokens: int) -> float:
        return fused_moe_time(s, _moe(tokens=tokens, w_format=FP8, a_format=FP8,
                                      backend="cutlass", fp8_block=True)).fixed_s
    bw = s.memory.sustained_bytes_per_s
    wide = 2048 * 5 / 5.0
    per_token = (k.token_ns * 1e-9 + k.token_hidden_b * 4096 / bw
                 + 8 * (k.pair_width_b * wide + k.pair_hidden_b * 4096) / bw
                 + 8 * (k.local_width_b * wide + k.local_hidden_b * 4096) / bw)
    assert fixed(8192) - fixed(4096) == pytest.approx(4096 * per_token, rel=1e-9)


def test_unpriced_formats_and_backends_refused_with_a_reason() -> None:
    u = _h100()
    assert "int8 weights is not modelled" in (u.supports(_moe(w_format=FORMATS["int8"])) or "")
    # 4-bit weights: the kernels that have constants (Triton MXFP4, Marlin int4 / MXFP4)
    assert u.supports(_moe(w_format=FORMATS["mxfp4"])) is None
    assert "no fused_moe constants for triton_int4 " in (
        u.supports(_moe(w_format=FORMATS["int4"])) or "")
    assert "no fused_moe constants for triton_fp8 " in (
        u.supports(_moe(w_format=FP8, fp8_block=False)) or "")
    assert load("gpu/t4").units[0].supports(_moe()) == "no fused_moe constants for this GPU"
    # A100 carries H100's Triton bf16 constants; Ampere has no fp8 kernels
    a100 = load("gpu/a100").units[0]
    assert a100.supports(_moe()) is None
    assert "no fused_moe constants for triton_fp8_block" in (
        a100.supports(_moe(w_format=FP8)) or "")


def test_marlin_int4_carried_to_ampere_and_h200() -> None:
    """Marlin MoE is an sm80 kernel: gpu/a100 carries H100's marlin_int4 set (and no MXFP4
    kernel: refused with the reason), gpu/h200 all three 4-bit sets (same die). A
    prefill-sized W4A16 call (16384 tokens x top-8 of 384 experts, 7168 / 2048: MMA and
    dequant bound) scales from H100 to A100 by the ratio of their FP16 FMA rates per chip
    (MMAs) and of their SMs x clock (the carried per-SM dequant rate): its compute time lies
    between the two ratios."""
    a100, h100 = load("gpu/a100").units[0], _h100()
    h200 = load("gpu/h200").units[0].spec
    w4 = _moe(tokens=16384, hidden=7168, width=2048, experts=384, top_k=8, backend="marlin",
              w_format=FORMATS["int4"])
    assert a100.supports(w4) is None
    assert "no fused_moe constants for triton_mxfp4" in (
        a100.supports(_moe(w_format=FORMATS["mxfp4"])) or "")
    for key in ("triton_mxfp4", "marlin_int4", "marlin_mxfp4"):
        assert getattr(h200.fused_moe, key) == getattr(h100.spec.fused_moe, key)
    a, h = a100.spec, h100.spec
    sm_clock = (h.sm_count * h.tensor_clock_mhz) / (a.sm_count * a.tensor_clock_mhz)
    fma = sm_clock * h.tc_rate_per_sm("fp16") / a.tc_rate_per_sm("fp16")
    ta, th = fused_moe_time(a, w4), fused_moe_time(h, w4)
    lo, hi = sorted((sm_clock, fma))
    assert th.compute_s * lo <= ta.compute_s <= th.compute_s * hi
    assert ta.time_s > th.time_s


def test_h200_same_kernels_faster_hbm() -> None:
    """H200 carries H100's constants (same die, same kernels): a weight-bound decode call is
    faster by at most the HBM ratio (4.8 vs 3.35 TB/s peak), a fixed-cost-bound one not."""
    h100, h200 = _h100().spec, load("gpu/h200").units[0].spec
    big = [fused_moe_time(s, _moe(tokens=16)).time_s for s in (h100, h200)]
    assert 1.0 < big[0] / big[1] <= h200.memory.sustained_bytes_per_s \
        / h100.memory.sustained_bytes_per_s + 1e-9
    tiny = [fused_moe_time(s, _moe(ep=256, width=64)).time_s for s in (h100, h200)]
    assert tiny[0] / tiny[1] < 1.1


# ---- the op in the graph ----------------------------------------------------------------
def test_builder_emits_one_fused_op_per_moe_block_on_request() -> None:
    ops_path = build_workload("mixtral-8x7b", phase="decode", batch=8)
    fused = build_workload("mixtral-8x7b", phase="decode", batch=8, moe_routing="balanced")
    moe = [o for o in fused.ops() if o.role == "moe"]
    assert len(moe) == 32 and all(isinstance(o, FusedMoE) for o in moe)
    assert not [o for o in fused.ops() if o.role.startswith("expert_")]
    assert fused.parameters == ops_path.parameters
    # ep 2: 4 of Mixtral's 8 experts on the device, which sees both devices' 8 tokens
    ep2 = build_workload("mixtral-8x7b", phase="decode", batch=8, ep=2, moe_routing="balanced")
    o = next(o for o in ep2.ops() if o.role == "moe")
    assert (o.local_experts, o.tokens, o.width) == (4, 16, 14336)


def test_fused_moe_runs_in_the_experts_format() -> None:
    """gpt-oss ships its routed experts in MXFP4 (``expert_w_format``): the fused op carries
    that format (not the blocks' 16-bit one) and vLLM's kernel for it (Triton: OpenAI's
    MXFP4 kernel); int4 experts go to Marlin (``ops.moe_backend``). Its weight bytes are the
    MXFP4 ones: 4 experts hit at one token x 3 x 2880 x 2880 x 4.25 / 8 B."""
    w = build_workload("gpt-oss-20b", phase="decode", batch=1, moe_routing="balanced")
    op = next(o for o in w.ops() if o.role == "moe")
    assert (op.w_format.name, op.backend) == ("mxfp4", "triton")
    assert op.weight_bytes() == pytest.approx(4 * 3 * 2880 * 2880 * 4.25 / 8)
    assert _h100().supports(op) is None
    assert moe_backend(FORMATS["int4"]) == "marlin"
    assert moe_backend(FORMATS["mxfp4"]) == moe_backend(BF16) == "triton"


def test_serving_builds_the_fused_op_on_request() -> None:
    """A serving replica's graphs (``DeviceBuild``) take ``moe_routing``: gpt-oss's MoE
    blocks become one fused MXFP4 call each, the separate expert GEMMs are gone; without it
    they stay (the default)."""
    acc = load("gpu/h100")
    s = transformer_shape("gpt-oss-20b")
    fused = device_build(acc, moe_routing="balanced").graph(s, "decode", 8, None, 512)
    sep = device_build(acc).graph(s, "decode", 8, None, 512)
    assert [o.w_format.name for o in fused.ops() if o.role == "moe"] == ["mxfp4"] * 24
    assert not [o for o in fused.ops() if o.role.startswith("expert_")]
    assert [o for o in sep.ops() if o.role.startswith("expert_")]
    with pytest.raises(WorkloadError, match="--moe-routing"):
        device_build(acc, moe_routing="zipf")


def test_vllm_rows_of_moe_models_serve_the_fused_kernel() -> None:
    """archsim.validation.serving_h100: a vLLM row of a MoE model with 4-bit experts
    (gpt-oss) runs vLLM's fused MoE call (balanced routing); fp8 experts (MiniMax: which of
    vLLM's fp8 MoE kernels ran is not given), TensorRT-LLM rows and dense models keep
    separate GEMMs."""
    def row(backend: str, model: str) -> Deployment:
        return Deployment(backend, model, "fp4", "agg", 1024, 1024, 8, 4, 1, 1, 1, 50.0, 5.0,
                          2, (0, 0, 0, 0), (0, 0, 0, 0), 1)
    assert moe_routing(row("vllm", "openai/gpt-oss-120b")) == "balanced"
    assert moe_routing(row("vllm", "openai/gpt-oss-120b"), fused_moe=False) is None
    assert moe_routing(row("trtllm", "openai/gpt-oss-120b")) is None
    assert moe_routing(row("vllm", "meta-llama/Llama-3.1-8B-Instruct")) is None
    assert moe_routing(row("vllm", "MiniMaxAI/MiniMax-M2.5")) is None


def test_builder_refuses_fused_moe_where_it_does_not_apply() -> None:
    with pytest.raises(WorkloadError, match="--moe-routing: a fused MoE layer: gpt2-small has no"):
        build_workload("gpt2-small", moe_routing="balanced")
    with pytest.raises(WorkloadError, match="not for phase train"):
        build_workload("mixtral-8x7b", phase="train", moe_routing="balanced")


def test_run_serving_prices_the_fused_mxfp4_call() -> None:
    """run_serving(moe_routing=...) serves gpt-oss-20b with its experts as the fused MXFP4
    call: one client's decode steps differ from the separate-GEMM ones (another kernel),
    and both runs finish their requests."""
    def tpot(mr: str | None) -> float:
        r = run_serving("gpu/h100", "gpt-oss-20b", concurrency=1, isl="64", osl="8",
                        requests=2, moe_routing=mr)
        assert r.benchmark is not None
        return r.benchmark.tpot_ms["mean"]
    fused, sep = tpot("balanced"), tpot(None)
    assert fused > 0 and sep > 0 and fused != sep


def test_serve_cli_bad_moe_routing_names_the_flag(capsys) -> None:
    from archsim.cli import main

    assert main(["serve", "gpu/h100", "--model", "gpt-oss-20b", "--concurrency", "1",
                 "--isl", "64", "--osl", "4", "--moe-routing", "zipf"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--moe-routing" in err[0]


def test_run_cli_prices_mixtral_decode_with_skewed_routing(capsys) -> None:
    from archsim.cli import main

    assert main(["run", "gpu/h100", "--model", "mixtral-8x7b", "--phase", "decode",
                 "--batch", "8", "--moe-routing", "power_law:1.2", "--json"]) == 0
    assert '"moe_routing": "power_law:1.2"' in capsys.readouterr().out
    assert main(["run", "gpu/h100", "--model", "mixtral-8x7b", "--moe-routing", "zipf"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--moe-routing" in err[0]


# ---- the fit on kernels_h100/moe.csv.gz --------------------------------------------------
#: check-half (hidden 2688, 2816, 3072, 5120, 6144, 7168: not fitted) medians, docs/gpu.md
#: (measured 7.0 %, 5.7 %, 7.5 %, 7.85 %: the issue's 8 % for every class)
_CHECK_MEDIAN = {"vllm_moe_triton_bf16": 0.08, "vllm_moe_triton_fp8_block": 0.08,
                 "vllm_moe_cutlass_fp8": 0.08, "vllm_moe_cutlass_fp8_block": 0.08}
#: fit half (measured 7.3 %, 3.3 %, 7.45 %, 6.3 %)
_FIT_MEDIAN = {"vllm_moe_triton_bf16": 0.08, "vllm_moe_triton_fp8_block": 0.04,
               "vllm_moe_cutlass_fp8": 0.08, "vllm_moe_cutlass_fp8_block": 0.07}
_STRIDE = 7


#: the 4-bit weight-only kernels' moe_dtype values (scored on every row, below)
_FOUR_BIT = ("int4_wo", "w4a16_mxfp4")


@needs_tables
def test_kernels_h100_moe_per_class_both_halves() -> None:
    """Back-to-back predictions of every 7th priced row of shared/reference/kernels_h100/
    moe.csv.gz (the 16-bit and fp8 kernels' rows): median |error| per class (kernel x weight
    format) on the check half and on the fit half (hidden 1024, 2048, 4096)."""
    rows = [r for r in silicon.load_rows(MOE_CSV) if r.data["dtype"] not in _FOUR_BIT]
    rows = rows[::_STRIDE]
    unit = load("gpu/h100").units[0]
    for half, limits in (("check", _CHECK_MEDIAN), ("fit", _FIT_MEDIAN)):
        scores = silicon.score(unit, [r for r in rows if shape_half(r.data) == half])
        assert set(scores) == set(limits)
        for cls, sc in scores.items():
            assert len(sc.errors) > 300
            assert sc.median_abs <= limits[cls], (half, cls, sc.median_abs)


#: the 4-bit kernels, every row (docs/gpu.md "Fused MoE as vLLM runs it", the 4-bit table):
#: (fit, check) median |error| limits; measured fit / check 3.6 / 3.6 % (Marlin int4),
#: 3.6 / 3.3 % (Marlin MXFP4), 6.6 / 7.0 % (gpt-oss's Triton MXFP4): the issue's 8 %
_FOUR_BIT_MEDIAN = {"vllm_moe_marlin_int4": (0.04, 0.04), "vllm_moe_marlin_mxfp4": (0.04, 0.04),
                    "vllm_moe_triton_mxfp4": (0.07, 0.075)}


@needs_tables
def test_kernels_h100_moe_four_bit_both_halves() -> None:
    """The three 4-bit weight-only kernels (gpt-oss's MXFP4 Triton kernel, Marlin MoE int4
    and MXFP4) on every row of moe.csv.gz, per half: each kernel measures one model shape,
    so the halves split by another shape family (``kernel_tables.shape_half``): gpt-oss by
    its expert count (32 fit, 128 check), Marlin by the per-device expert shape (log2(tp x ep)
    even fit, odd check)."""
    rows = [r for r in silicon.load_rows(MOE_CSV) if r.data["dtype"] in _FOUR_BIT]
    unit = load("gpu/h100").units[0]
    for i, half in enumerate(("fit", "check")):
        mine = [r for r in rows if shape_half(r.data) == half]
        scores = silicon.score(unit, mine)
        assert set(scores) == set(_FOUR_BIT_MEDIAN)
        for cls, sc in scores.items():
            assert len(sc.errors) >= 486, (half, cls)
            assert sc.median_abs <= _FOUR_BIT_MEDIAN[cls][i], (half, cls, sc.median_abs)
    gpt_oss = [r.data for r in rows if kernel_class(r.data) == "vllm_moe_triton_mxfp4"]
    assert {d["experts"] for d in gpt_oss if shape_half(d) == "fit"} == {32}
    assert {d["experts"] for d in gpt_oss if shape_half(d) == "check"} == {128}


@needs_tables
def test_moe_rows_become_the_op_they_measure() -> None:
    """A row's op: expert width sharded by moe_tp_size, experts / moe_ep_size local."""
    rows = silicon.load_rows(MOE_CSV)
    d = next(r.data for r in rows if r.data["tp"] == 4 and r.data["hidden"] == 4096
             and r.data["inter"] == 2048 and r.data["top_k"] == 8)
    op = moe_op(d)
    assert (op.width, op.local_experts, op.top_k) == (512, 256, 8)
    assert kernel_class(d).startswith("vllm_moe_")
    assert {r.data["dtype"] for r in rows} == {"bfloat16", "fp8", "fp8_block", "int4_wo",
                                               "w4a16_mxfp4"}
    # the 4-bit rows: weight-only formats, Marlin or gpt-oss's Triton kernel
    gpt = next(r.data for r in rows if r.data["dtype"] == "w4a16_mxfp4"
               and r.data["backend"] == "triton")
    assert moe_op(gpt).w_format.name == "mxfp4" and moe_op(gpt).a_format.name == "bf16"
    assert kernel_class(gpt) == "vllm_moe_triton_mxfp4"
    w4 = next(r.data for r in rows if r.data["dtype"] == "int4_wo")
    assert (moe_op(w4).w_format.name, kernel_class(w4)) == ("int4", "vllm_moe_marlin_int4")
    assert not moe_op(next(r.data for r in rows if r.data["hidden"] == 2688)).gated


@needs_tables
def test_calibrate_reports_moe_classes_per_half(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cal_mod, "KERNEL_TABLE_STRIDE", 97)
    text = "\n".join(cal_mod.calibrate(MOE_CSV, "gpu/h100").report)
    assert "check half" in text and "vllm_moe_triton_bf16" in text


def test_ep_all_to_all_is_the_nccl_model() -> None:
    """EP dispatch / combine are AllToAll collectives priced by arch.collective (the NCCL
    all-to-all fitted on nccl.csv.gz), not a formula of their own: each device sends its
    tokens / tp x top_k x d elements (fp16) to the ep group."""
    s = transformer_shape("mixtral-8x7b")
    plan = ParallelPlan(tp=1, ep=2, dp=2)
    comms = [c for c in layer_comms(s, plan, "decode", 8, 1, True) if c.group == "ep"]
    assert [c.kind for c in comms] == ["alltoall", "alltoall"]
    assert comms[0].payload_bytes() == 8 * 2 * 4096 * 2       # 8 tokens x top-2 x d x 2 B
