"""Property tests (hypothesis): roofline, monotonicity, W4A16 transition, batching."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_helpers import GPUS, gpu  # noqa: E402

from archsim.arch.gpu.choice import gemm_kernel_class  # noqa: E402
from archsim.workloads.formats import FORMATS  # noqa: E402
from archsim.workloads.ops import (  # noqa: E402
    AllReduce,
    Conv2d,
    Elementwise,
    Embedding,
    Gemm,
    Norm,
    Softmax,
    Sparsity,
)

FMT_PAIRS = [("fp16", "fp16"), ("bf16", "bf16"), ("fp16", "int4"), ("bf16", "int8"),
             ("int8", "int8"), ("int4", "int4"), ("int6", "int6"), ("fp8_e4m3", "fp8_e4m3"),
             ("fp32", "fp32"), ("tf32", "tf32"), ("int2", "int1"), ("fp16", "mxfp4"),
             ("ternary", "ternary"), ("nvfp4", "nvfp4"), ("fp4", "fp4"),
             ("fp6_e3m2", "fp6_e3m2"), ("bf16", "fp4")]
dims = st.integers(min_value=1, max_value=20000)
small = st.integers(min_value=1, max_value=64)


@st.composite
def gemms(draw):
    a, w = draw(st.sampled_from(FMT_PAIRS))
    b_shared = draw(st.sampled_from([1, 1, 2, 4]))
    batch = b_shared * draw(st.integers(1, 8))
    sparse = draw(st.sampled_from([Sparsity(), Sparsity(), Sparsity(2, 4), Sparsity(density=0.3)]))
    b_is_weight = draw(st.booleans())
    return Gemm(name="g", m=draw(dims), n=draw(dims), k=draw(dims), batch=batch,
                b_shared=b_shared if not b_is_weight else 1, b_is_weight=b_is_weight,
                a_format=FORMATS[a], w_format=FORMATS[w],
                group_size=draw(st.sampled_from([0, 64, 128])),
                w_sparsity=sparse if b_is_weight else Sparsity(),
                role=draw(st.sampled_from(["", "qk", "av"])))


@settings(max_examples=150, deadline=None)
@given(g=gemms(), name=st.sampled_from(GPUS),
       mapping=st.sampled_from([None, "attn_fused", "gemm_splitk", "bitserial", "simt"]))
def test_gemm_never_beats_roofline(g: Gemm, name: str, mapping) -> None:
    u = gpu(name)
    e = u.estimate(g, mapping)
    if not e.feasible:
        return
    assert e.cycles >= u.roofline_cycles(g, mapping) - 1e-6


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(GPUS), rows=st.integers(1, 1 << 16), cols=st.integers(1, 1 << 14),
       kind=st.sampled_from(["softmax", "attn.softmax", "norm", "add", "gelu", "copy", "emb",
                             "ar", "conv"]),
       devices=st.integers(1, 8))
def test_other_ops_never_beat_roofline(name, rows, cols, kind, devices) -> None:
    u = gpu(name)
    if kind in ("softmax", "attn.softmax"):
        op = Softmax(name=kind, rows=rows, cols=cols)
    elif kind == "norm":
        op = Norm(name="n", rows=rows, cols=cols, norm="rmsnorm")
    elif kind == "emb":
        op = Embedding(name="e", tokens=rows, dim=cols, vocab=32000)
    elif kind == "ar":
        op = AllReduce(name="ar", elements=rows * cols, devices=devices)
    elif kind == "conv":
        op = Conv2d(name="c", n=devices, c=1 + cols % 256, h=8 + rows % 64, w=8 + rows % 64,
                    k=1 + rows % 512, r=3, s=3, padding=1)
    else:
        op = Elementwise(name="x", rows=rows, cols=cols, fn=kind, inputs=2 if kind == "add" else 1)
    for mapping in (None, "attn_fused"):
        e = u.estimate(op, mapping)
        if e.feasible:
            assert e.cycles >= u.roofline_cycles(op, mapping) - 1e-6


@settings(max_examples=120, deadline=None)
@given(name=st.sampled_from(GPUS), m=dims, n=dims, k=dims, dim=st.sampled_from("mnk"),
       delta=st.integers(1, 4096), fmts=st.sampled_from(FMT_PAIRS[:8]))
def test_latency_monotone_in_m_n_k(name, m, n, k, dim, delta, fmts) -> None:
    """A bigger GEMM is never faster, unless growing N or K moves its rows into a better
    aligned kernel class (align1 -> narrow -> TMA, ``arch.gpu.choice``: a faster kernel, as
    on silicon: 4096 x 4095 x 4096 runs 2.4x slower than 4096^3), so both shapes are compared
    within one kernel class."""
    u = gpu(name)
    a, w = (FORMATS[f] for f in fmts)
    base = dict(m=m, n=n, k=k)
    bigger = dict(base)
    bigger[dim] += delta

    def aligned(s: dict) -> str:   # the library kernel class of the rows' alignment
        return gemm_kernel_class(u.spec, s["n"], s["k"], a.bits, w.bits).name

    assume(aligned(base) == aligned(bigger))
    e0 = u.estimate(Gemm(name="g", a_format=a, w_format=w, group_size=128, **base))
    e1 = u.estimate(Gemm(name="g", a_format=a, w_format=w, group_size=128, **bigger))
    assert e1.cycles >= e0.cycles, (base, bigger, e0.mapping, e1.mapping)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(GPUS), m=dims, n=st.integers(1, 8192), k=st.integers(1, 8192),
       batch=st.integers(1, 16))
def test_doubling_batch_never_lowers_latency(name, m, n, k, batch) -> None:
    u = gpu(name)
    e1 = u.estimate(Gemm(name="g", m=m, n=n, k=k, batch=batch, b_is_weight=False))
    e2 = u.estimate(Gemm(name="g", m=m, n=n, k=k, batch=2 * batch, b_is_weight=False))
    assert e2.cycles >= e1.cycles


def test_w4a16_speedup_memory_to_compute_transition() -> None:
    """W4A16 (int4 weights, group 128) over fp16 on a 8192 x 28672 layer (Llama-70B FFN).

    Small batch: weight traffic dominates, speedup ~ 16 / 4.25 bits = 3.8 less the launch
    overhead -> >= 3.2x. Large batch: both are compute-bound at the fp16 MMA rate -> <= 1.2x.
    The curve never rises by more than 2% as the batch grows.
    """
    for name in ("a100", "h100", "h200"):
        u = gpu(name)
        sp = []
        for m in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384):
            f16 = Gemm(name="g", m=m, n=28672, k=8192)
            w4 = Gemm(name="g", m=m, n=28672, k=8192, w_format=FORMATS["int4"], group_size=128)
            sp.append(u.estimate(f16).latency_s / u.estimate(w4).latency_s)
        assert min(sp[:5]) >= 3.2, (name, sp)
        assert max(sp[-3:]) <= 1.2, (name, sp)
        assert all(b <= a * 1.02 for a, b in zip(sp, sp[1:])), (name, sp)


@settings(max_examples=30, deadline=None)
@given(m=dims, n=dims, k=dims, fmt=st.sampled_from(["bf16", "fp16", "fp8_e4m3", "int8"]))
def test_power_capped_gpu_never_exceeds_its_limit(m, n, k, fmt) -> None:
    """H100 (power section): every GEMM's board power is at most the 700 W limit, at a clock
    on the V-f curve, and a kernel below the limit runs at the top clock."""
    u = gpu("h100")
    f = FORMATS[fmt]
    e = u.estimate(Gemm(name="g", m=m, n=n, k=k, a_format=f, w_format=f))
    p = u.spec.power
    assert e.details["power_w"] <= p.power_limit_w + 1e-9
    assert p.min_mhz <= e.details["clock_mhz"] <= p.top_mhz
    if e.details["power_capped"] == 0.0:
        assert e.details["clock_mhz"] == p.top_mhz
