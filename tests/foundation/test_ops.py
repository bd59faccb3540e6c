"""Ops and formats: closed-form MACs, shapes and bytes."""

from __future__ import annotations

import pytest

from archsim.workloads.errors import WorkloadError
from archsim.workloads.formats import FORMATS, get_format
from archsim.workloads.graph import Workload
from archsim.workloads.ops import Conv2d, Elementwise, Gemm, Norm, Softmax, Sparsity


def test_format_bits():
    assert get_format("bf16").bits == 16
    # MX formats: 32-element blocks with one 8-bit scale -> +0.25 bit per element (OCP MX v1.0)
    assert get_format("mxfp4").bits_per_element == 4.25
    assert get_format("mxint8").bits_per_element == 8.25
    assert get_format("ternary").info_bits == pytest.approx(1.585, abs=1e-3)
    with pytest.raises(WorkloadError) as ei:
        get_format("fp7")
    assert "fp16" in str(ei.value)
    assert {"fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8", "int6", "int4",
            "int3", "int2", "ternary", "int1", "mxfp4", "mxint8"} <= set(FORMATS)


def test_gemm_counts():
    g = Gemm(name="g", m=4, n=8, k=16, batch=2)
    assert g.macs() == 2 * 4 * 8 * 16 and g.flops() == 2 * g.macs()
    # fp16: A 2*4*16*2 = 256 B, W 2*16*8*2 = 512 B, C 2*4*8*2 = 128 B
    assert (g.input_bytes(), g.weight_bytes(), g.output_bytes()) == (256, 512, 128)


def test_gqa_shares_b():
    # 8 query heads, 2 kv heads: 4 heads share one K matrix -> B bytes = 2 * k * n * 2
    qk = Gemm(name="qk", m=1, n=100, k=64, batch=8, b_is_weight=False, b_shared=4)
    assert qk.b_bytes() == 2 * 64 * 100 * 2


def test_weight_only_quant_group_scales():
    # int4 weights 128x64, group 32 along K -> 4 groups x 64 cols of fp16 scale + zero
    g = Gemm(name="g", m=1, n=64, k=128, w_format=get_format("int4"), group_size=32)
    assert g.weight_bytes() == 128 * 64 * 0.5 + 4 * 64 * 2 * 2


def test_nm_sparsity_weight_bytes_and_macs():
    g = Gemm(name="g", m=2, n=8, k=16, w_sparsity=Sparsity(n=2, m=4))
    assert g.effective_macs() == g.macs() / 2
    # half the values, plus 2 index bits per non-zero: 64 * (2 + 0.25) bytes
    assert g.weight_bytes() == 64 * 2.25
    assert Sparsity.parse("2:8").fraction == 0.25
    with pytest.raises(WorkloadError):
        Sparsity.parse("5:4")


def test_conv_shapes():
    # ResNet stem: 224x224, 7x7/2, pad 3 -> 112x112; MACs = 64*112*112*3*49 = 118013952
    c = Conv2d(name="c", n=1, c=3, h=224, w=224, k=64, r=7, s=7, stride=2, padding=3)
    assert (c.p, c.q) == (112, 112) and c.macs() == 118_013_952
    g = c.as_gemm()
    assert (g.m, g.n, g.k) == (112 * 112, 64, 147) and g.macs() == c.macs()
    dw = Conv2d(name="dw", n=1, c=32, h=10, w=10, k=32, r=3, s=3, padding=1, groups=32)
    assert dw.depthwise and dw.macs() == 32 * 100 * 9


def test_training_pass_shapes_preserve_macs():
    g = Gemm(name="g", m=6, n=10, k=14)
    for p in ("bwd_data", "bwd_weight"):
        assert g.as_pass(p).macs() == g.macs()
    assert (g.as_pass("bwd_data").n, g.as_pass("bwd_data").k) == (14, 10)


def test_vector_ops():
    assert Softmax(name="s", rows=2, cols=10).vector_ops() == 100
    assert Norm(name="n", rows=2, cols=10, norm="rmsnorm").vector_ops() == 100
    assert Elementwise(name="e", rows=1, cols=10, fn="add", inputs=2).input_bytes() == 40


@pytest.mark.parametrize("kw", [dict(m=0, n=1, k=1), dict(m=1, n=1, k=1, batch=3, b_shared=2),
                                dict(m=1, n=1, k=1, pass_="sideways")])
def test_bad_ops(kw):
    with pytest.raises(WorkloadError):
        Gemm(name="g", **kw)


def test_workload_topological_and_duplicates():
    w = Workload("w")
    a = w.add(Gemm(name="a", m=1, n=1, k=1))
    b = w.add(Softmax(name="b", rows=1, cols=1), [a])
    w.add(Elementwise(name="c", rows=1, cols=1, fn="add", inputs=2), [a, b])
    assert [o.name for o in w.ops()] == ["a", "b", "c"]
    assert w.graph.edges["a", "b"]["bytes"] == a.output_bytes()
    with pytest.raises(WorkloadError):
        w.add(Gemm(name="a", m=1, n=1, k=1))
    with pytest.raises(WorkloadError):
        w.add(Gemm(name="d", m=1, n=1, k=1), ["missing"])
