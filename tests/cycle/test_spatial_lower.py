"""Spatial array at cycle fidelity: ``SpatialArray.lower`` -> ``sim.run``.

Expectations are worked out here from the fold model (Samajdar et al., ISPASS 2020:
``ceil(Sr/R) * ceil(Sc/C)`` folds of ``2R + C + T - 2`` cycles) and from bytes / bandwidth,
not copied from the model. Graph clock = array clock x RESOLUTION (16 ticks per cycle):
every memory transfer is rounded up to whole ticks.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim import sim
from archsim.arch import load_data
from archsim.arch.spatial.lower import CHUNKS, MAX_GROUPS, RESOLUTION, FoldTable, _groups
from archsim.workloads.errors import ConfigError, MappingError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Conv2d, Gemm, Softmax
from tests.conftest import ROOT, spatial_config


def unit(memory: dict | None = None, **kw):
    cfg = spatial_config(**kw)
    if memory:
        cfg["units"][0]["memory"].update(memory)
    return load_data(cfg).units[0]


def stats(u, op, mapping=None):
    si = u.lower(op, mapping)
    return si.graph, si.run()


# ---- closed form: compute-bound -----------------------------------------------------------
# 4x4 array, GEMM M=10, N=6, K=8 (same arithmetic as tests/arch/test_spatial.py):
#   WS: 2*2 folds * (8 + 4 + 10 - 2) = 80;  OS: 3*2 * (8 + 4 + 8 - 2) = 108;
#   IS: 2*3 folds * (8 + 4 + 6 - 2) = 96.
# At 1e9 GB/s every transfer takes one tick: the first stationary + stream load (2 ticks)
# and the last write (1 tick) add 3 ticks < 1 cycle, so the makespan is the fold sum + 1.
@pytest.mark.parametrize("dataflow,folds_sum", [("ws", 80), ("os", 108), ("is", 96)])
def test_compute_bound_makespan_is_fold_sum(dataflow, folds_sum):
    u = unit(dataflow=dataflow)
    op = Gemm(name="g", m=10, n=6, k=8)
    assert u.simulate(op) == folds_sum + 1
    _, st_ = stats(u, op)
    array = st_.busy_cycles[0]                      # resource 0 = the PE array
    assert array == folds_sum * RESOLUTION          # the array is busy exactly the fold sum


def test_batch_runs_folds_back_to_back():
    # 3 x 80 cycles on the WS array above
    assert unit(dataflow="ws").simulate(Gemm(name="g", m=10, n=6, k=8, batch=3)) == 240 + 1


def test_conv_lowers_as_im2col_gemm():
    # im2col GEMM M = 16, N = 8, K = 36 on 4x4 WS: 9*2 folds * (8 + 4 + 16 - 2) = 468
    conv = Conv2d(name="c", n=1, c=4, h=6, w=6, k=8, r=3, s=3)
    assert unit(dataflow="ws").simulate(conv) == 468 + 1


# ---- closed form: memory-bound ------------------------------------------------------------
def test_memory_bound_makespan_is_bytes_over_bandwidth():
    # 1 GB/s at 100 MHz, efficiency 1 = 10 bytes/cycle. GEMV m=1, n=k=256, fp16, 32x32 WS,
    # 4 MiB GLB (A fits, no spill): A 1*256*2 + B 256*256*2 + C 1*256*2 = 132096 bytes
    # -> 13209.6 cycles of memory; compute 64 folds * 95 = 6080 cycles.
    u = unit(bandwidth_gbps=1.0, dataflow="ws", glb_kib=4096, rows=32, cols=32)
    op = Gemm(name="g", m=1, n=256, k=256)
    tg, st_ = stats(u, op)
    assert int(tg.mem_bytes.sum()) == 132096
    mem = 132096 / 10
    n_mem = int(np.count_nonzero(tg.kind > 0))
    cyc = u.simulate(op)
    # lower bound: the memory is one serial server; upper: + rounding (<= 1 tick per
    # transfer) + the last fold (95 cycles), which cannot start before its weight tile,
    # the last read, has arrived (its output write overlaps it, chunk by chunk)
    assert math.ceil(mem) <= cyc <= mem + n_mem / RESOLUTION + 95 + 1
    assert st_.busy_cycles[2] >= mem * RESOLUTION   # resource 2 = memory


def test_vector_op_closed_form():
    # softmax 64 x 100: 5 ops/element -> 32000 ops / 4 lanes = 8000 cycles, compute-bound
    assert unit().simulate(Softmax(name="s", rows=64, cols=100)) in (8000, 8001)


# ---- properties ---------------------------------------------------------------------------
_shapes = st.tuples(st.integers(1, 300), st.integers(1, 300), st.integers(1, 300),
                    st.integers(1, 3))
_arrays = st.sampled_from([(4, 4), (8, 16), (32, 32), (16, 8)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_shapes, _arrays, st.sampled_from(["ws", "os", "is"]),
       st.sampled_from([0.05, 1.0, 50.0]), st.sampled_from([1.0, 16.0, 1024.0]))
def test_makespan_bounds_and_action_totals(shape, arr, df, bw, glb):
    m, n, k, b = shape
    u = unit(rows=arr[0], cols=arr[1], dataflow=df, bandwidth_gbps=bw, glb_kib=glb)
    op = Gemm(name="g", m=m, n=n, k=k, batch=b)
    est = u.estimate(op)
    tg, st_ = stats(u, op)
    cyc = st_.makespan_cycles / RESOLUTION
    # fold sum written out independently of fold_cycles
    sr, sc, t = {"ws": (k, n, m), "os": (m, n, k), "is": (k, m, n)}[df]
    fold_sum = b * math.ceil(sr / arr[0]) * math.ceil(sc / arr[1]) * (2 * arr[0] + arr[1] + t - 2)
    bpc = bw * 1e9 / u.clock_hz                      # efficiency 1 in spatial_config
    mem = float(tg.mem_bytes.sum()) / bpc
    assert cyc >= fold_sum                           # the array runs folds one at a time
    assert cyc >= mem - 1e-6                         # the memory is one serial server
    assert cyc >= u.roofline_cycles(op) - 1e-6
    # never worse than running every task serially (+ tick rounding of transfers)
    n_mem = int(np.count_nonzero(tg.kind > 0))
    assert cyc <= fold_sum + mem + n_mem / RESOLUTION + 1e-6
    # bytes and actions: the graph carries exactly the Estimate's totals
    assert tg.mem_bytes.sum() == pytest.approx(est.dram_bytes, abs=2)
    tot = {(tg.component_names[c], tg.action_names[a]): st_.action_totals[c, a]
           for c in range(len(tg.component_names)) for a in range(len(tg.action_names))}
    for key, v in est.actions.items():
        assert tot.get(key, 0.0) == pytest.approx(v, rel=1e-9, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(_shapes, _arrays, st.sampled_from(["ws", "os", "is"]), st.sampled_from([1.0, 64.0]))
def test_fold_table_covers_the_gemm_and_its_traffic(shape, arr, df, part):
    # the folds' useful MACs cover M*N*K exactly once per batch entry, and their bytes are
    # gemm_traffic's element counts times the element sizes (A 1 B, B 2 B, psum 4 B, out 1 B)
    from archsim.arch.spatial import gemm_traffic
    from archsim.arch.spatial.lower import fold_table

    m, n, k, b = shape
    g = Gemm(name="g", m=m, n=n, k=k, batch=b)
    t = fold_table(df, g, arr[0], arr[1], part, 1.0, 2.0, 4.0, 1.0)
    assert t.macs.sum() == b * m * n * k
    tr = gemm_traffic(df, m, n, k, arr[0], arr[1], part)
    reads = tr.a_elems * 1 + tr.b_elems * 2 + tr.c_read_elems * 4
    writes = (tr.c_write_elems - m * n) * 4 + m * n * 1
    assert t.stationary.sum() + t.stream.sum() == pytest.approx(b * reads)
    assert t.write.sum() == pytest.approx(b * writes)


def test_same_input_same_result():
    u = unit(rows=8, cols=8, bandwidth_gbps=0.5, dataflow="os", glb_kib=2)
    op = Gemm(name="g", m=70, n=50, k=90, batch=2)
    a, b = stats(u, op)[1], stats(u, op)[1]
    assert a.makespan_cycles == b.makespan_cycles
    assert np.array_equal(a.task_end, b.task_end)


# ---- aggregation --------------------------------------------------------------------------
def test_many_folds_are_grouped_and_compute_stays_exact():
    # 4x4 WS, K = N = 400, M = 4: 100 * 100 = 10000 folds of (8 + 4 + 4 - 2) = 14 cycles
    # = 140000 cycles; more folds than MAX_GROUPS, so groups are merged.
    u = unit(dataflow="ws")
    op = Gemm(name="g", m=4, n=400, k=400)
    tg = u.lower(op).graph
    assert 10000 > MAX_GROUPS
    assert tg.num_tasks <= MAX_GROUPS * (1 + 3 * CHUNKS)
    assert u.simulate(op) in (140000, 140001)


def test_folds_without_traffic_join_the_previous_group():
    # folds 1, 2 move nothing (operands resident): they join fold 0's group; fold 3 loads.
    z = np.zeros(4)
    t = FoldTable(np.full(4, 10, np.int64), np.array([5.0, 0, 0, 5]), z.copy(), z.copy(),
                  np.ones(4), False)
    assert _groups(t, 100).tolist() == [0, 0, 0, 1]


# ---- reference design: estimate vs simulation ---------------------------------------------
def test_resnet18_on_tpu_like_estimate_matches_simulation():
    """Tolerance: 2 % on the network total, 10 % per matrix op. The simulation adds the
    unoverlapped first stream chunk and last write (the estimate adds the first stationary
    tile instead) and shows the bunching of operand loads that the estimate's
    ``max(compute, memory)`` smooths away (folds that reload A stall, the others do not)."""
    import archsim

    acc = archsim.load("tpu_like")
    wl = archsim.workload("resnet18")
    ra = archsim.evaluate(acc, wl)
    rc = archsim.evaluate(acc, wl, fidelity="cycle")
    assert rc.cycles == pytest.approx(ra.cycles, rel=0.02)
    for a, c in zip(ra.ops, rc.ops, strict=True):
        if a.kind in ("gemm", "conv2d"):
            assert c.cycles == pytest.approx(a.cycles, rel=0.10), a.name


# ---- command-level DRAM -------------------------------------------------------------------
def test_dram_memory_model_runs_and_respects_peak_bandwidth():
    u = unit(rows=16, cols=16, dataflow="ws", glb_kib=64,
             memory={"model": "dram", "preset": "DDR4-2400"})
    op = Gemm(name="g", m=64, n=256, k=512)
    si = u.lower(op)
    assert si.dram_configs[0].name == "DDR4-2400"
    cyc = u.simulate(op)
    peak = sim.peak_bytes_per_s(sim.dram_preset("DDR4-2400")) / u.clock_hz
    assert cyc >= si.graph.mem_bytes.sum() / peak
    # WS fold sum: Sr = K = 512 -> 32 folds, Sc = N = 256 -> 16 folds, T = 64:
    assert cyc >= 32 * 16 * (32 + 16 + 64 - 2)


# ---- mapper loop-nest mappings ------------------------------------------------------------
def test_loop_nest_mapping_lowers_as_pipeline():
    from archsim.mapper.gemm_search import best_mapping

    u = unit(rows=8, cols=8, bandwidth_gbps=2.0, glb_kib=64)
    op = Gemm(name="g", m=64, n=64, k=64)
    res = best_mapping(u, op)
    assert res is not None
    mp = res.mapping
    est = u.estimate(op, mp)
    cyc = u.simulate(op, mp)
    # the mapper's compute cycles run on the array; its DRAM bytes on the 20 B/cycle memory
    assert cyc >= est.details["compute_cycles"]
    assert cyc >= est.dram_bytes / (2.0e9 / u.clock_hz) - 1e-6


# ---- bad input ----------------------------------------------------------------------------
def test_unsupported_op_is_a_mapping_error():
    u = unit(mac_format="int8")
    op = Gemm(name="g", m=4, n=4, k=4, a_format=FORMATS["fp16"], w_format=FORMATS["fp16"])
    with pytest.raises(MappingError, match="g"):
        u.lower(op)


def test_unknown_dram_preset_is_a_config_error():
    u = unit(memory={"model": "dram", "preset": "DDR9"})
    with pytest.raises(ConfigError, match="memory.preset"):
        u.lower(Gemm(name="g", m=4, n=4, k=4))


# ---- no-JIT subset ------------------------------------------------------------------------
_NOJIT = """
import archsim, sim
from archsim.workloads.ops import Gemm
from archsim.arch import load_data
from tests.conftest import spatial_config
for df in ("ws", "os", "is"):
    u = load_data(spatial_config(rows=4, cols=4, bandwidth_gbps=0.2, dataflow=df,
                                 glb_kib=0.25)).units[0]
    print(df, u.simulate(Gemm(name="g", m=13, n=9, k=11, batch=2)))
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="already no JIT")
def test_same_cycles_without_jit():
    outs = []
    for jit in ("0", "1"):
        env = dict(os.environ, NUMBA_DISABLE_JIT=jit)
        p = subprocess.run([sys.executable, "-c", _NOJIT], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        outs.append(p.stdout)
    assert outs[0] == outs[1]
    assert len(outs[0].splitlines()) == 3
