"""Einsum constructors (closed-form sizes) and access-count properties of dataflow.nest."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.dataflow.einsum import (
    attention_av,
    attention_qk,
    batched_gemm,
    conv2d,
    from_op,
    gemm,
)
from archsim.dataflow.hierarchy import ComputeLevel, Hierarchy, StorageLevel
from archsim.dataflow.nest import LevelMapping, NestMapping, analyse
from archsim.workloads.ops import Conv2d, Gemm


def test_conv2d_sizes_stride_dilation() -> None:
    e = conv2d(2, 3, 4, 5, 6, 3, 2, stride=(2, 1), dilation=(1, 2))
    assert e.macs == 2 * 3 * 4 * 5 * 6 * 3 * 2
    # W = 2P + R: (5-1)*2 + (3-1) + 1 = 11; H = Q + 2S: (6-1) + 2*(2-1) + 1 = 8
    assert e.size("Inputs") == 2 * 3 * 11 * 8
    assert e.size("Weights") == 3 * 4 * 3 * 2 and e.size("Outputs") == 2 * 4 * 6 * 5


def test_grouped_and_depthwise_from_zoo_op() -> None:
    dw = Conv2d(name="dw", n=1, c=32, h=16, w=16, k=32, r=3, s=3, padding=1, groups=32)
    e = from_op(dw)
    assert e.dims["G"] == 32 and e.dims["C"] == 1 and e.dims["M"] == 1
    assert e.macs == dw.macs()                          # 32 * 16 * 16 * 9
    assert e.size("Weights") == 32 * 9                  # one 3x3 filter per channel
    assert e.size("Inputs") == 32 * 18 * 18             # padded 16+2 (Timeloop's box)
    g = from_op(Conv2d(name="g", n=1, c=8, h=8, w=8, k=16, r=1, s=1, groups=4))
    assert g.size("Weights") == 4 * 2 * 4 and g.macs == 4 * 2 * 4 * 64


def test_gemm_bmm_attention() -> None:
    assert gemm(4, 5, 6).macs == 120 and gemm(4, 5, 6).size("Z") == 20
    b = batched_gemm(3, 4, 5, 6)
    assert b.size("B") == 3 * 6 * 5 and b.size("A") == 3 * 4 * 6
    shared = batched_gemm(3, 4, 5, 6, shared_b=True)
    assert shared.size("B") == 6 * 5 and shared.macs == 3 * 120
    gqa = from_op(Gemm(name="qk", m=4, n=5, k=6, batch=8, b_shared=4))
    assert gqa.size("B") == 2 * 6 * 5 and gqa.size("A") == 8 * 4 * 6 and gqa.macs == 8 * 120
    qk, av = attention_qk(12, 128, 128, 64), attention_av(12, 128, 128, 64)
    assert qk.size("S") == 12 * 128 * 128 and av.size("V") == 12 * 128 * 64
    assert qk.macs == av.macs == 12 * 128 * 128 * 64


_HIER = Hierarchy((StorageLevel("buf"), StorageLevel("dram", technology="DRAM")),
                  ComputeLevel("mac", 1))
_ALL = frozenset({"Weights", "Inputs", "Outputs"})
_DIMS = ("C", "M", "R", "S", "N", "P", "Q")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3]), min_size=7, max_size=7),
       st.lists(st.sampled_from([1, 2]), min_size=7, max_size=7),
       st.permutations(_DIMS), st.sampled_from([1, 2]))
def test_dram_traffic_at_least_compulsory(inner: list[int], outer: list[int],
                                          order: list[str], stride: int) -> None:
    bounds = {d: i * o for d, i, o in zip(_DIMS, inner, outer, strict=True)}
    prob = conv2d(bounds["N"], bounds["C"], bounds["M"], bounds["P"], bounds["Q"],
                  bounds["R"], bounds["S"], stride=(stride, stride))
    mp = NestMapping((LevelMapping(tuple((d, i) for d, i in zip(_DIMS, inner, strict=True)),
                                   (), _ALL),
                      LevelMapping(tuple((d, dict(zip(_DIMS, outer, strict=True))[d])
                                         for d in order), (), _ALL)))
    res = analyse(prob, _HIER, mp)
    dram = res.stats["dram"]
    # property: the outermost level serves at least every element once (compulsory). The
    # Inputs box counts strided gaps (Timeloop's boxes); the elements really touched are
    # the distinct projections, counted here by enumeration:
    touched = {(n, c, p * stride + r, q * stride + s) for n in range(bounds["N"])
               for c in range(bounds["C"]) for p in range(bounds["P"])
               for q in range(bounds["Q"]) for r in range(bounds["R"])
               for s in range(bounds["S"])}
    assert dram["Inputs"].reads >= len(touched)
    assert dram["Weights"].reads >= prob.size("Weights")
    assert dram["Outputs"].updates >= prob.size("Outputs")
    # and the buffer is filled with exactly what DRAM serves (no fan-out in between)
    assert res.stats["buf"]["Inputs"].fills == dram["Inputs"].reads
    # with a single DRAM iteration the whole box is read exactly once
    if math.prod(outer) == 1:
        assert dram["Inputs"].reads == prob.size("Inputs")
        assert dram["Outputs"].updates == prob.size("Outputs")
