"""Group-wise weight scales and GPTQ act-order under tensor parallelism (issue 31, item 4b),
as vLLM runs it: weights pre-permuted at load time, each GEMM's input permuted first, and the
row-parallel layers' ranks keeping every group's scales of the whole K; no activation gather.

Closed forms worked out here: a row-parallel shard's weight bytes = k*n*bits/8 + (k*tp/G)*n
* (scale + zero, 2 B each); its decode GEMV's HBM time = (those bytes + 3 reads/writes of the
input + the output) / bandwidth; the collectives of the graph are the same with and without
act-order (nothing is gathered).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gpu_helpers import gpu  # noqa: E402

from archsim.workloads.errors import WorkloadError  # noqa: E402
from archsim.workloads.formats import FORMATS  # noqa: E402
from archsim.workloads.graph import ROW_PARALLEL_ROLES  # noqa: E402
from archsim.workloads.ops import Gemm  # noqa: E402
from archsim.workloads.zoo import build  # noqa: E402

INT4, FP16 = FORMATS["int4"], FORMATS["fp16"]
G, TP = 128, 8


def _graph(act_order: bool):
    wl = build("llama3-70b", phase="decode", batch=1, context=128, tp=TP)
    return wl.with_formats(None, INT4).with_weight_groups(G, act_order, TP)


def test_row_parallel_shards_keep_every_groups_scales():
    plain, ordered = _graph(False), _graph(True)
    for a, b in zip(plain.ops(), ordered.ops(), strict=True):
        if not (isinstance(b, Gemm) and b.group_size):
            continue
        assert b.permute_a and not a.permute_a
        if b.role in ROW_PARALLEL_ROLES:
            assert b.group_span == b.k * TP
            # k*n int4 values + (k*tp/128)*n groups of (fp16 scale + fp16 zero)
            assert b.weight_bytes() == pytest.approx(b.k * b.n / 2 + b.k * TP / G * b.n * 4)
            assert a.weight_bytes() == pytest.approx(a.k * a.n / 2 + a.k / G * a.n * 4)
        else:                      # column-parallel: the rank holds all of K already
            assert b.group_span == 0 and b.weight_bytes() == a.weight_bytes()


def test_no_communication_is_added():
    def comms(wl):
        return [(op.kind, op.payload_bytes() if hasattr(op, "payload_bytes") else None)
                for op in wl.ops() if op.role == "collective"]
    assert comms(_graph(True)) == comms(_graph(False))
    assert comms(_graph(True))      # (there are tp all-reduces to compare)


def test_decode_gemv_hbm_time_closed_form():
    """Llama-3-70B's down projection shard at tp 8: k = 28672/8 = 3584, n = 8192."""
    u = gpu("h100")
    k, n = 28672 // TP, 8192
    g = Gemm(name="down", m=1, n=n, k=k, a_format=FP16, w_format=INT4, group_size=G,
             group_span=k * TP, permute_a=True, role="ffn_down")
    e = u.estimate(g)
    moved = k * n / 2 + k * TP / G * n * 4 + 3 * k * 2 + n * 2
    assert e.details["hbm_s"] == pytest.approx(moved / u.spec.memory.sustained_bytes_per_s,
                                               rel=1e-3)


def test_refusals_name_the_flag():
    wl = build("llama3-8b", phase="decode", batch=1, context=128)
    with pytest.raises(WorkloadError, match="--act-order"):
        wl.with_weight_groups(0, act_order=True)
    with pytest.raises(WorkloadError, match="--w-group-size.*fp16"):
        wl.with_weight_groups(128)
    with pytest.raises(WorkloadError, match="--w-group-size"):
        wl.with_weight_groups(-1)
    assert wl.with_weight_groups(0) is wl
