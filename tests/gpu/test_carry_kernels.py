"""The serving-framework kernel classes carried from the H100 fit to gpu/h200 and gpu/a100 by
mechanism (issue 26; docs/gpu.md "What each GPU carries from the H100 fit").

Every row here is built in the test (synthetic shapes, no measured table): each class must
have a prediction on both GPUs, and the properties asserted are worked out independently:
the H200 is the H100's die with HBM3e (decode streams scale with the HBM rate, compute-bound
prefill and short calls do not move); the A100 runs FlashAttention-2, whose main-loop
efficiency is fitted on one figure of the FlashAttention-2 paper and checked on another.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from archsim import kernel_tables as kt
from archsim.api import device_build, load
from archsim.arch.cluster import single_node
from archsim.arch.collective import collective, place
from archsim.arch.gpu.paged_attention import fa2_tile, paged_attention_parts
from archsim.cli import main
from archsim.workloads.errors import WorkloadError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Attention, Gemm

BF16 = FORMATS["bf16"]


@pytest.fixture(scope="module")
def units():
    return {n: kt.back_to_back(load(f"gpu/{n}").units[0]) for n in ("h100", "h200", "a100")}


def _gemm(m: int, n: int, k: int, dtype: str) -> dict:
    return {"kind": "gemm", "protocol": "b2b", "m": m, "n": n, "k": k, "dtype": dtype,
            "quant": dtype == "fp8", "ms": 1.0}


def _attn(b: int, isl: int, step: int, h: int, kv: int, d: int, kv_dtype: str = "bf16",
          window: int = 0) -> dict:
    return {"kind": "attn_generation" if step else "attn_context", "protocol": "b2b", "b": b,
            "isl": isl, "step": step, "h": h, "kv": kv, "d": d, "window": window,
            "dtype": "bf16", "kv_dtype": kv_dtype, "ms": 1.0}


def _moe(dtype: str, backend: str) -> dict:
    return {"kind": "moe", "protocol": "b2b", "tokens": 256, "hidden": 4096, "inter": 14336,
            "top_k": 2, "experts": 8, "tp": 1, "ep": 1, "routing": "balanced",
            "backend": backend, "dtype": dtype, "ms": 1.0}


ROWS = {
    "vllm_gemm_bf16": _gemm(2048, 4096, 4096, "bf16"),
    "vllm_gemm_fp8": _gemm(2048, 4096, 4096, "fp8"),
    "vllm_gemm_small_m": _gemm(16, 4096, 4096, "bf16"),
    "vllm_attn_prefill": _attn(4, 1024, 0, 32, 8, 128),
    "vllm_attn_decode": _attn(32, 1, 4096, 32, 8, 128),
    "vllm_moe_triton_bf16": _moe("bfloat16", "triton"),
}
#: classes vLLM runs only on Hopper (fp8 tensor cores); on Ampere it runs other kernels
HOPPER_ONLY = {"vllm_moe_triton_fp8_block": _moe("fp8_block", "triton"),
               "vllm_moe_cutlass_fp8": _moe("fp8", "cutlass"),
               "vllm_moe_cutlass_fp8_block": _moe("fp8_block", "cutlass")}


@pytest.mark.parametrize("gpu", ["h200", "a100"])
@pytest.mark.parametrize("cls", sorted(ROWS))
def test_every_class_predicts(units, gpu, cls):
    row = ROWS[cls]
    assert kt.kernel_class(row) == cls
    p = kt.predict_b2b_ms(units[gpu], row)
    assert p is not None and p > 0


@pytest.mark.parametrize("cls", sorted(HOPPER_ONLY))
def test_fp8_moe_classes_carry_to_h200(units, cls):
    assert kt.kernel_class(HOPPER_ONLY[cls]) == cls
    assert kt.predict_b2b_ms(units["h200"], HOPPER_ONLY[cls]) is not None


@pytest.mark.parametrize("gpu,kind,impl", [
    (g, k, i) for g in ("h200", "a100")
    for k, i in (("allreduce", "nccl"), ("allgather", "nccl"), ("reducescatter", "nccl"),
                 ("alltoall", "nccl"), ("allreduce", "custom-graph"),
                 ("allreduce", "custom-eager"))])
def test_collectives_on_one_node_of_the_gpu(gpu, kind, impl):
    # nccl-tests and vLLM's custom all-reduce on 8 GPUs of one board: the H100-fitted
    # protocols on the GPU's own NVLink (arch/link.py device_link)
    node = single_node(load(f"gpu/{gpu}"), 8)
    assert collective(node, kind, 2**20, place(node, 8, 1), impl=impl).time_s > 0


# ------------------------------------------------------------------- H200: same die, HBM3e

def _ratio(units, row: dict) -> float:
    return kt.predict_b2b_ms(units["h100"], row) / kt.predict_b2b_ms(units["h200"], row)


def test_h200_long_context_decode_scales_with_hbm(units):
    # 64 sequences x 8 KV heads x 32k keys x 128 x 2 (K, V) x 2 B = 8.6 GB streamed: the
    # call is the stream, so H100 / H200 time -> 4.8 / 3.35 TB/s (the same efficiency 0.9)
    r = _ratio(units, _attn(64, 1, 32768, 64, 8, 128))
    assert r == pytest.approx(4800 / 3350, rel=0.03)


def test_h200_compute_bound_prefill_is_the_h100s(units):
    # 16k causal tokens, 32 heads of 128: MMAs and exp on the same 132 SMs at the same clock
    assert _ratio(units, _attn(1, 16384, 0, 32, 8, 128)) == pytest.approx(1.0, abs=0.01)


def test_h200_short_calls_are_the_h100s(units):
    # one sequence, 16 cached tokens: the backend's fixed kernels, nothing streamed
    assert _ratio(units, _attn(1, 1, 16, 32, 8, 128)) == pytest.approx(1.0, abs=0.01)
    assert _ratio(units, _attn(1, 16, 0, 32, 8, 128)) == pytest.approx(1.0, abs=0.01)


def test_h200_fp8_kv_decode_carries(units):
    # FA3's e4m3 path carries too: half the K/V bytes of the bf16 cache at long context
    bf = kt.predict_b2b_ms(units["h200"], _attn(64, 1, 32768, 64, 8, 128))
    f8 = kt.predict_b2b_ms(units["h200"], _attn(64, 1, 32768, 64, 8, 128, "fp8"))
    assert f8 / bf == pytest.approx(0.5, rel=0.05)


# --------------------------------------------------------- A100: FlashAttention-2 by mechanism

#: FlashAttention-2 paper (Dao 2023, arXiv 2307.08691, Fig. 5 "Attention forward speed on
#: A100 GPU", A100 80GB SXM4): batch x seqlen = 16k tokens, hidden 2048 (head_dim 64: 32
#: heads; 128: 16 heads), FLOPs = 4 seqlen^2 head_dim heads (halved with a causal mask).
#: Fig. 5b (no causal mask, head_dim 128) at 16k: 225 TFLOP/s -- the fit; Fig. 5a (head_dim
#: 64) at 16k: 192 and Fig. 5c (causal, head_dim 64) at 16k: 185 -- the checks.
FA2_FIT = (128, False, 225.0)
FA2_CHECKS = ((64, False, 192.0), (64, True, 185.0))


def _fa2_tflops(spec, d: int, causal: bool, seq: int = 16384) -> float:
    """The paper's throughput of the modelled FA2 kernel: its FLOPs over the kernel body
    max(SM time, HBM time) (the paper times the attention kernel alone: no KV-cache write,
    no backend call)."""
    b, h = 16384 // seq, 2048 // d
    op = Attention(name="a", batch=b, heads=h, kv_heads=h, q_len=seq, kv_len=seq, head_dim=d,
                   causal=causal, kernel="paged", a_format=BF16, w_format=BF16)
    t = paged_attention_parts(spec, op)
    return 4.0 * b * seq * seq * d * h / (2 if causal else 1) / max(t.sm_s, t.hbm_s) / 1e12


def _with_eff(spec, eff: float):
    return replace(spec, paged_attention=replace(spec.paged_attention, mma_efficiency=eff))


def test_fa2_efficiency_fitted_on_one_paper_figure():
    # the fit: the efficiency at which the model gives Fig. 5b's 225 TFLOP/s (bisection; the
    # throughput rises with it), equal to the shipped constant to its three decimals
    spec = load("gpu/a100").units[0].spec
    d, causal, target = FA2_FIT
    lo, hi = 0.5, 1.0
    while hi - lo > 1e-5:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _fa2_tflops(_with_eff(spec, mid), d, causal) < target else (lo, mid)
    assert spec.paged_attention.mma_efficiency == pytest.approx(lo, abs=6e-4)
    assert _fa2_tflops(spec, d, causal) == pytest.approx(target, rel=0.10)


@pytest.mark.parametrize("d,causal,paper", FA2_CHECKS)
def test_fa2_checked_on_the_papers_other_figures(d, causal, paper):
    # head_dim 64 halves the MMA work per (query, key) pair but not its exp: the model's
    # split between the two is what this checks (192 and 185 TFLOP/s in the paper)
    assert _fa2_tflops(load("gpu/a100").units[0].spec, d, causal) == pytest.approx(paper,
                                                                                  rel=0.10)


def test_fa2_tiles_and_unpacked_gqa_closed_form():
    # FA2's split-KV kernel (a paged cache): 64 x 256 / 64 x 128 / 64 x 64 by head_dim
    assert [fa2_tile(d) for d in (64, 128, 256)] == [(64, 256, True), (64, 128, True),
                                                     (64, 64, True)]
    # 4 query heads over 1 KV head, 64 tokens, head_dim 128, no mask: FA2 does not pack GQA
    # in prefill, so 4 CTAs of one 64-row block each over one 128-key tile (8192 pairs
    # computed); 4 CTAs < 108 SMs, so the SM time is one CTA's
    s = load("gpu/a100").units[0].spec
    c, f = s.paged_attention, 1410e6
    pair = 2 * 128 / (4 * 256 * c.mma_efficiency * f) + 1 / (16 * f)
    cta = c.cta_us * 1e-6 + 64 * 128 * c.cta_tile_ns * 1e-9
    op = Attention(name="a", batch=1, heads=4, kv_heads=1, q_len=64, kv_len=64, head_dim=128,
                   causal=False, kernel="paged", a_format=BF16, w_format=BF16)
    assert paged_attention_parts(s, op).sm_s == pytest.approx(cta + 8192 * pair, rel=1e-9)


def test_a100_fp8_kv_cache_is_refused_not_priced_as_fa3(units, capsys):
    # FA2 has no fp8 KV kernel: vLLM's FLASH_ATTN backend takes fp8 only on FA3 (sm90)
    assert kt.predict_b2b_ms(units["a100"], _attn(8, 1, 4096, 32, 8, 128, "fp8")) is None
    assert kt.predict_b2b_ms(units["a100"], _attn(1, 512, 0, 32, 8, 128, "fp8")) is None
    with pytest.raises(WorkloadError, match="--kv-format"):
        device_build(load("gpu/a100"), attention_kernel="paged", kv_format="fp8_e4m3")
    rc = main(["serve", "gpu/a100", "--model", "gpt2-small", "--concurrency", "2", "--isl",
               "64", "--osl", "4", "--requests", "2", "--kv-format", "fp8_e4m3"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--kv-format" in err and "FlashAttention-2" in err
    assert len(err.splitlines()) == 1


def test_a100_fp8_linear_is_weight_only_marlin(units):
    # vLLM on sm80 runs an fp8 linear as FP8 Marlin (W8A16): bf16 activations, no
    # quantisation kernel; a one-token GEMV then streams 1-byte weights: faster than bf16
    a = units["a100"]
    assert kt.fp8_linear_is_marlin(a.spec) and not kt.fp8_linear_is_marlin(units["h200"].spec)
    row = _gemm(1, 8192, 8192, "fp8")
    w8a16 = Gemm(name="g", m=1, n=8192, k=8192, a_format=BF16, w_format=FORMATS["fp8_e4m3"])
    assert kt.predict_b2b_ms(a, row) == pytest.approx(a.estimate(w8a16).latency_s * 1e3)
    assert kt.predict_b2b_ms(a, row) < kt.predict_b2b_ms(a, _gemm(1, 8192, 8192, "bf16"))


def test_fa2_rows_of_the_table_are_read(tmp_path):
    # the collector labels vLLM FLASH_ATTN rows by FA version (vllm_flash_attn_fa<N>); FA4
    # rows are read too, with their label (test_fa4.py)
    p = tmp_path / "attention_context.csv"
    p.write_text("kernel,batch_size,isl,step,num_heads,num_key_value_heads,head_dim,attn_dtype,"
                 "kv_cache_dtype,window_size,ms\n"
                 "vllm_flash_attn_fa2,1,512,0,32,8,128,bfloat16,bfloat16,0,0.1\n"
                 "vllm_flash_attn_fa4,1,512,0,32,8,128,bfloat16,bfloat16,0,0.1\n")
    rows = kt.load_kernel_rows(p)
    assert [i for i, _ in rows] == [2, 3] and [d.get("fa") for _, d in rows] == [None, "fa4"]


@pytest.mark.parametrize("gpu", ["h200", "a100"])
def test_serve_uses_the_paged_model(gpu, capsys):
    rc = main(["serve", f"gpu/{gpu}", "--model", "gpt2-small", "--concurrency", "2", "--isl",
               "64", "--osl", "4", "--requests", "2"])
    assert rc == 0 and "no paged-KV attention model" not in capsys.readouterr().err


def test_a100_back_to_back_launch_is_the_h100s(units):
    # launch_b2b_us carried (docs/gpu.md "A100: what is carried"): a tiny GEMM queued behind
    # another costs the H100's 1.94 us + the A100's DRAM latency (0.5 us) + a tiny body,
    # not the isolated 4 us launch
    assert units["a100"].spec.launch_b2b_us == units["h100"].spec.launch_b2b_us
    tiny = kt.predict_b2b_ms(units["a100"], _gemm(1, 32, 32, "bf16")) * 1e3
    assert 1.94 + 0.5 < tiny < 1.94 + 0.5 + 0.3
    alone = load("gpu/a100").units[0].estimate(
        Gemm(name="g", m=1, n=32, k=32, a_format=BF16, w_format=BF16)).latency_s * 1e6
    assert alone - tiny == pytest.approx(4.0 - 1.94, abs=0.05)


def test_fa2_windowed_decode_runs_one_cta_per_query_head():
    # FA2 folds a KV head's query heads into one CTA's rows only without a window
    # (seqlenq_ngroups_swapped); with one: 64 sequences x 32 query heads = 2048 CTAs over 108
    # SMs, each (decode_cta_us + 128 x cta_dim_ns); without: 64 x 8 KV heads = 512
    s = load("gpu/a100").units[0].spec
    c = s.paged_attention

    def fixed(window: int) -> float:
        op = Attention(name="a", batch=64, heads=32, kv_heads=8, q_len=1, kv_len=4097,
                       head_dim=128, window=window, kernel="paged", a_format=BF16,
                       w_format=BF16)
        return paged_attention_parts(s, op).fixed_s

    cta = c.decode_cta_us * 1e-6 + 128 * c.cta_dim_ns * 1e-9
    base = c.decode_call_us * 1e-6 + 64 * c.seq_ns * 1e-9
    assert fixed(128) == pytest.approx(base + 2048 / 108 * cta, rel=1e-12)
    assert fixed(0) == pytest.approx(base + 512 / 108 * cta, rel=1e-12)


def test_flash_attention_rows_read_by_name() -> None:
    """The collector names FLASH_ATTN rows ``vllm_flash_attn`` + ``_fa<version>``: every
    version is read (FA2 / FA3 priced by the GPU's own generation, FA4 by FA4's constants:
    test_fa4.py); other backends are not."""
    from archsim.kernel_tables import is_fa_row

    for k in ("vllm_flash_attn_fa3", "vllm_flash_attn_fa2", "vllm_flash_attn_fa4",
              "vllm_flash_attn"):
        assert is_fa_row(k), k
    for k in ("vllm_flashinfer", "vllm_flash_attnx", "trtllm_attention"):
        assert not is_fa_row(k), k
