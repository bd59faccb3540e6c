"""Spatial array: closed-form cycle counts (SCALE-Sim's fold model) and properties.

Fold model (Samajdar et al., ISPASS 2020): a GEMM C[M,N] = A[M,K] B[K,N] on an R x C array
takes ceil(Sr/R) * ceil(Sc/C) folds of (2R + C + T - 2) cycles, with
(Sr, Sc, T) = (K, N, M) for WS, (M, N, K) for OS and (K, M, N) for IS.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.arch import load_data
from archsim.workloads.ops import Conv2d, Elementwise, Gemm, Softmax
from tests.conftest import spatial_config


def unit(**kw):
    return load_data(spatial_config(**kw)).units[0]


# ---- closed form -------------------------------------------------------------------------
# 4x4 array, GEMM M=10, N=6, K=8, effectively infinite bandwidth (compute-bound):
#   WS: Sr=K=8 -> 2 folds, Sc=N=6 -> 2 folds, T=M=10: 4 * (2*4 + 4 + 10 - 2) = 4 * 20 = 80
#   OS: Sr=M=10 -> 3 folds, Sc=N=6 -> 2 folds, T=K=8:  6 * (8 + 4 + 8 - 2)  = 6 * 18 = 108
#   IS: Sr=K=8 -> 2 folds, Sc=M=10 -> 3 folds, T=N=6:  6 * (8 + 4 + 6 - 2)  = 6 * 16 = 96
@pytest.mark.parametrize("dataflow,expected", [("ws", 80), ("os", 108), ("is", 96)])
def test_gemm_cycles_closed_form(dataflow, expected):
    u = unit(dataflow=dataflow)
    est = u.estimate(Gemm(name="g", m=10, n=6, k=8))
    assert est.cycles == expected
    assert est.dataflow == dataflow
    # utilisation = MACs / (cycles * PEs) = 480 / (expected * 16)
    assert est.utilization == pytest.approx(480 / (expected * 16))


def test_batch_multiplies_folds():
    # batch of 3 identical GEMMs: 3 x 80 cycles on the WS array above
    est = unit(dataflow="ws").estimate(Gemm(name="g", m=10, n=6, k=8, batch=3))
    assert est.cycles == 240


def test_conv_runs_as_im2col_gemm():
    # 1x4x6x6 input, 8 filters 3x3, stride 1, no padding -> P=Q=4:
    # im2col GEMM M = 16, N = 8, K = 4*9 = 36. WS on 4x4: Sr=36 -> 9 folds, Sc=8 -> 2 folds,
    # T=16: 18 * (8 + 4 + 16 - 2) = 18 * 26 = 468
    conv = Conv2d(name="c", n=1, c=4, h=6, w=6, k=8, r=3, s=3)
    assert unit(dataflow="ws").estimate(conv).cycles == 468


def test_memory_bound_gemm_latency_is_bytes_over_bandwidth():
    # 1 GB/s at 100 MHz = 10 bytes/cycle. GEMV m=1, n=k=256, fp16: compulsory bytes
    # A 1*256*2 + B 256*256*2 + C 1*256*2 = 132096 bytes -> 13209.6 cycles; on a 32x32 WS
    # array compute is 8*8 folds * (2*32 + 32 + 1 - 2) = 64 * 95 = 6080 cycles < 13209.6
    u = unit(bandwidth_gbps=1.0, dataflow="ws", glb_kib=4096, rows=32, cols=32)
    est = u.estimate(Gemm(name="g", m=1, n=256, k=256))
    assert est.bound == "memory"
    assert est.details["compute_cycles"] == 6080
    first_tile = 32 * 32 * 2 / 10  # first stationary 32x32 fp16 tile
    assert est.cycles == math.ceil(132096 / 10 + first_tile)


def test_vector_op_cycles():
    # softmax 64 x 100: 5 ops/element -> 32000 ops over 4 lanes = 8000 cycles (compute-bound)
    est = unit().estimate(Softmax(name="s", rows=64, cols=100))
    assert est.cycles == 8000


def test_wider_format_not_supported():
    u = unit(mac_format="int8")
    est = u.estimate(Gemm(name="g", m=4, n=4, k=4))  # fp16 operands
    assert not est.feasible and "wider" in est.reason


# ---- properties --------------------------------------------------------------------------
dims = st.integers(1, 300)
arrays = st.sampled_from([(4, 4), (8, 16), (32, 32), (16, 8)])
dfs = st.sampled_from(["ws", "os", "is"])
bws = st.sampled_from([0.5, 8.0, 100.0, 1e6])
glbs = st.sampled_from([1.0, 64.0, 4096.0])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=dims, n=dims, k=dims, b=st.integers(1, 4), arr=arrays, df=dfs, bw=bws, glb=glbs)
def test_gemm_never_beats_roofline(m, n, k, b, arr, df, bw, glb):
    u = unit(rows=arr[0], cols=arr[1], dataflow=df, bandwidth_gbps=bw, glb_kib=glb)
    op = Gemm(name="g", m=m, n=n, k=k, batch=b)
    est = u.estimate(op)
    bound = max(op.macs() / (arr[0] * arr[1]), op.min_bytes() / u.peak_bytes_per_cycle())
    assert est.cycles >= math.floor(bound)
    assert 0 < est.utilization <= 1.0


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 4), c=st.integers(1, 64), hw=st.integers(3, 40), k=st.integers(1, 64),
       r=st.sampled_from([1, 3, 5]), stride=st.sampled_from([1, 2]), df=dfs, bw=bws)
def test_conv_and_vector_never_beat_roofline(n, c, hw, k, r, stride, df, bw):
    u = unit(dataflow=df, bandwidth_gbps=bw, rows=8, cols=8)
    for op in (Conv2d(name="c", n=n, c=c, h=hw, w=hw, k=k, r=r, s=r, stride=stride, padding=r // 2),
               Elementwise(name="e", rows=n * c, cols=hw * hw, fn="gelu")):
        est = u.estimate(op)
        assert est.cycles >= math.floor(u.roofline_cycles(op))


@settings(max_examples=80, deadline=None)
@given(m=dims, n=dims, k=dims, b=st.integers(1, 8), df=dfs, bw=bws, glb=glbs)
def test_doubling_batch_never_lowers_latency(m, n, k, b, df, bw, glb):
    u = unit(dataflow=df, bandwidth_gbps=bw, glb_kib=glb)
    one = u.estimate(Gemm(name="g", m=m, n=n, k=k, batch=b))
    two = u.estimate(Gemm(name="g", m=m, n=n, k=k, batch=2 * b))
    assert two.cycles >= one.cycles
