"""Cycle-level lowering of tensor-core GPU kernels to ``sim.TaskGraph`` (CTA-tile granularity).

The analytical model (``arch.gpu.gemm``) takes ``max(SM, L2, HBM)`` time for a GEMM; here
the same kernel is expressed as tasks and contention emerges in the event engine:

* resources (clock = the tensor clock ``r.f_hz``): per SM a tensor-core datapath
  (``sm<i>.tc``, one k-step at a time) and its L2 -> shared-memory load path
  (``sm<i>.ld``, ``load_bytes_per_clock``); the shared L2 (``l2``, its bandwidth) and HBM
  (``hbm``, the sustained bandwidth); DRAM latency and launch overhead are pure delays;
* CTAs are assigned round-robin to SMs (CTA ``i`` -> SM ``i mod S``) and hold one of the
  SM's ``ctas_per_sm`` slots: CTA ``i`` starts when CTA ``i - S*co`` has stored its tile;
* per k-step of a CTA: DRAM latency -> its share of HBM reads -> L2 read -> SM load ->
  MMA (``t_core = max(MMA, shared-memory reads, dequant)`` cycles); the load of step
  ``j`` waits for the MMA of step ``j - stages`` (its stage buffer); MMAs of a CTA run
  in order; after the last MMA the epilogue stores the C tile (and split-K partials)
  through the load path and HBM.
* Large grids: consecutive k-steps of a CTA are merged into chunks so that the graph has
  at most ``max_steps`` (CTA, chunk) pairs (durations and bytes scale with the chunk;
  with chunks the buffer rule becomes double buffering of chunks). Exact when
  ``n_cta * ksteps <= max_steps``; otherwise the pipeline fill/drain of each CTA is
  coarser by at most one chunk. The lowering is the reference the estimate is checked
  against (``tests/gpu/test_gpu_lower.py``).

Streaming kernels (softmax, norms, element-wise, gathers) are split into ``pieces``
read -> ALU -> write pipelines behind the launch and DRAM-latency delays; the ring
all-reduce is its link time (a server) beside its HBM traffic.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from archsim.arch.gpu.gemm import GemmResult
from archsim.arch.gpu.kernels import FA_BLOCK_Q, cta_pairs
from archsim.arch.gpu.spec import GpuSpec

__all__ = ["lower_gemm", "lower_stream", "lower_attention", "MAX_STEPS"]

#: Upper bound on (CTA, k-chunk) pairs of one lowered GEMM (5 tasks each).
MAX_STEPS = 16384
#: Time resolution: graph ticks per clock cycle. The engine rounds every task to whole
#: ticks; at one tick per cycle the ceil of thousands of ~1-cycle HBM/L2 transfers would
#: add up to +25% on memory-bound kernels. ``SimStats`` cycles are in ticks
#: (``TaskGraph.clock_hz`` = clock x RESOLUTION), which ``Unit.simulate`` converts.
RESOLUTION = 16


def _cyc(x: float) -> int:
    return int(math.ceil(x - 1e-9)) if x > 0 else 0


def lower_gemm(spec: GpuSpec, r: GemmResult, name: str = "gemm", pre_s: float = 0.0,
               max_steps: int = MAX_STEPS):
    """TaskGraph of the GEMM kernel ``r`` (the candidate chosen by ``gemm_time``).

    Args:
        spec: the GPU.
        r: the kernel (tile, split, stages, per-step times and traffic).
        name: op name (the graph's op).
        pre_s: seconds of work that must precede the mainloop on the CUDA cores (LUT
            table precompute); 0 for none.
        max_steps: bound on (CTA, chunk) pairs (see module docstring).
    """
    # deferred: loads numba (only cycle-level runs and nest searches need it)
    from archsim.sim import TaskGraphBuilder
    from archsim.sim.taskgraph import KIND_READ, KIND_WRITE

    f = r.f_hz
    S = spec.sm_count
    co = max(1, r.ctas_per_sm)
    n_cta = max(1, r.n_cta)
    ks = max(1, r.ksteps)
    nk = min(ks, max(1, max_steps // n_cta))          # chunks per CTA
    bounds = (np.arange(nk + 1) * ks) // nk
    csize = np.diff(bounds).astype(np.float64)        # k-steps per chunk (>= 1)
    buf = r.stages if nk == ks else 2                 # stage buffers (chunks: double)
    work = float(n_cta * ks)

    q = RESOLUTION
    b = TaskGraphBuilder(clock_hz=f * q)
    b.add_op(name)
    hbm = b.add_bandwidth_memory("hbm", spec.memory.sustained_bytes_per_s / f / q)
    # L2 bytes per SM clock (the L2 runs on the SM clock: same per cycle under DVFS)
    l2_bpc = spec.l2.bandwidth_gbps * 1e9 / spec.clock_hz
    l2 = b.add_bandwidth_memory("l2", l2_bpc / q)
    n_sm_used = min(S, n_cta)
    tc = np.array([b.add_server(f"sm{i}.tc") for i in range(n_sm_used)], np.int64)
    ld = np.array([b.add_bandwidth_memory(f"sm{i}.ld", spec.sm.load_bytes_per_clock / q)
                   for i in range(n_sm_used)], np.int64)

    # task 0: launch (+ precompute), a pure delay
    t0 = b.add_task(-1, _cyc(r.launch_s * f * q))
    first = t0
    if pre_s > 0:
        cuda = b.add_server("cuda_cores")
        first = b.add_task(cuda, _cyc(pre_s * f * q), deps=[t0])

    # ids: CTA starts [s0, s0+n_cta), steps [st0, st0 + n_cta*nk*5), epilogue ld, hbm write
    s0 = b.num_tasks
    st0 = s0 + n_cta
    e0 = st0 + n_cta * nk * 5
    w0 = e0 + n_cta
    cta = np.arange(n_cta)
    sm = cta % n_sm_used

    # CTA starts: after launch, and after the CTA that held this slot (i - S*co) finished
    prev = cta - n_sm_used * co
    has_prev = prev >= 0
    ndep = 1 + has_prev.astype(np.int64)
    dptr = np.zeros(n_cta + 1, np.int64)
    np.cumsum(ndep, out=dptr[1:])
    didx = np.empty(int(dptr[-1]), np.int64)
    didx[dptr[:-1]] = first
    didx[dptr[:-1][has_prev] + 1] = w0 + prev[has_prev]
    b.add_tasks(np.full(n_cta, -1), 0, dep_ptr=dptr, dep_idx=didx)

    # steps: per (CTA i, chunk j): D, H, L, LD, M
    ii = np.repeat(cta, nk)
    jj = np.tile(np.arange(nk), n_cta)
    g = ii * nk + jj
    cs = csize[jj]
    base = st0 + g * 5
    res = np.empty((g.size, 5), np.int64)
    res[:, 0] = -1
    res[:, 1] = hbm
    res[:, 2] = l2
    res[:, 3] = ld[sm[ii]]
    res[:, 4] = tc[sm[ii]]
    dur = np.zeros((g.size, 5), np.int64)
    dur[:, 0] = _cyc(r.lat_cyc * q)
    dur[:, 4] = np.ceil(r.t_core * cs * q - 1e-9).astype(np.int64)
    kind = np.zeros((g.size, 5), np.int8)
    kind[:, 1:4] = KIND_READ
    mb = np.zeros((g.size, 5), np.int64)
    mb[:, 1] = np.ceil(r.hbm_read_bytes * cs / work).astype(np.int64)
    mb[:, 2] = np.ceil(r.l2_bytes * cs / work).astype(np.int64)
    mb[:, 3] = np.ceil(r.stage_bytes * cs).astype(np.int64)
    # dependencies
    dl: list[np.ndarray] = []                        # per task column: (ptr counts, idx)
    # D: CTA start (j < buf) or the MMA that frees its buffer (j >= buf)
    d_dep = np.where(jj < buf, s0 + ii, st0 + (g - buf) * 5 + 4)
    # H <- D, L <- H, LD <- L
    # M <- LD, and M of the previous chunk (j > 0)
    m_prev = jj > 0
    counts = np.ones((g.size, 5), np.int64)
    counts[:, 4] += m_prev
    dptr = np.zeros(g.size * 5 + 1, np.int64)
    np.cumsum(counts.ravel(), out=dptr[1:])
    didx = np.empty(int(dptr[-1]), np.int64)
    starts = dptr[:-1].reshape(g.size, 5)
    didx[starts[:, 0]] = d_dep
    didx[starts[:, 1]] = base + 0
    didx[starts[:, 2]] = base + 1
    didx[starts[:, 3]] = base + 2
    didx[starts[:, 4]] = base + 3
    didx[starts[:, 4][m_prev] + 1] = (base - 5 + 4)[m_prev]
    del dl
    b.add_tasks(res.ravel(), dur.ravel(), kind=kind.ravel(), mem_bytes=mb.ravel(),
                dep_ptr=dptr, dep_idx=didx)

    # epilogue: C tile (+ split partials) through the SM path, then its HBM write share
    last_m = st0 + (cta * nk + nk - 1) * 5 + 4
    ep_bytes = _cyc(r.epi_bytes + r.split_bytes)
    b.add_tasks(ld[sm], 0, kind=KIND_WRITE, mem_bytes=max(1, ep_bytes),
                dep_ptr=np.arange(n_cta + 1), dep_idx=last_m)
    wb = _cyc(r.hbm_write_bytes / n_cta)
    b.add_tasks(np.full(n_cta, hbm), 0, kind=KIND_WRITE, mem_bytes=max(1, wb),
                dep_ptr=np.arange(n_cta + 1), dep_idx=e0 + cta)
    return b.build()


def lower_stream(spec: GpuSpec, name: str, read_b: float, write_b: float, ops: float,
                 sfu_ops: float = 0.0, launch: bool = True, link_s: float = 0.0,
                 pieces: int = 32, clock_hz: float = 0.0, launches: int = 1,
                 serial_s: float = 0.0):
    """TaskGraph of a streaming kernel: ``pieces`` read -> ALU/SFU -> write pipelines.

    Clock: the SM clock (``clock_hz``: the kernel's DVFS clock; 0 = ``spec.clock_hz``) x
    ``RESOLUTION``. ``link_s`` adds a network transfer (ring all-reduce) that runs beside the
    memory traffic; ``launches`` kernels launch one after the other before it (a split-KV
    decode's combine kernel); ``serial_s`` seconds of passes follow the stream (a softmax's
    re-read passes, ``GpuSpec.cuda_core.reduce_pass_bytes_per_clock``).
    """
    # deferred: loads numba (only cycle-level runs and nest searches need it)
    from archsim.sim import TaskGraphBuilder

    q = RESOLUTION
    f = (clock_hz or spec.clock_hz) * q
    b = TaskGraphBuilder(clock_hz=f)
    b.add_op(name)
    hbm = b.add_bandwidth_memory("hbm", spec.memory.sustained_bytes_per_s / f)
    alu = b.add_server("cuda_cores")
    t_alu = q * ops / (spec.sm_count * spec.cuda_core.fp32_lanes_per_sm)
    t_sfu = q * sfu_ops / (spec.sm_count * spec.cuda_core.sfu_per_sm)
    t_launch = b.add_task(-1, _cyc(launches * spec.kernel_launch_s * f)
                          if launch else 0)
    p = pieces if (read_b or write_b or ops) else 1
    lat = _cyc(spec.dram_latency_ns * 1e-9 * f) if read_b else 0
    ends = []
    prev_c = None
    for _ in range(p):
        d = b.add_task(-1, lat, deps=[t_launch])
        rd = b.add_read(hbm, _cyc(read_b / p), deps=[d]) if read_b else d
        deps = [rd] + ([prev_c] if prev_c is not None else [])
        c = b.add_compute(alu, _cyc(max(t_alu, t_sfu) / p), deps=deps)
        prev_c = c
        ends.append(b.add_write(hbm, _cyc(write_b / p), deps=[c]) if write_b else c)
    if link_s > 0:
        link = b.add_server("nvlink")
        ends.append(b.add_compute(link, _cyc(link_s * f), deps=[t_launch]))
    if serial_s > 0:
        ends = [b.add_task(-1, _cyc(serial_s * f), deps=ends)]
    b.add_join(ends)
    return b.build()


def lower_attention(spec: GpuSpec, op: Any, t: Any, f_hz: float, name: str = "attention",
                    max_steps: int = MAX_STEPS):
    """TaskGraph of a fused attention call (``arch.gpu.kernels``; ``t`` its AttentionTime).

    Decode (split-KV): a streaming kernel over K and V plus the combine kernel's launch.
    Prefill (FlashAttention-2): one CTA per (batch, head, 128-query block), heaviest first
    (FlashAttention-2's launch order for causal masks), one CTA per SM at a time (CTA ``i``
    on SM ``i mod S`` starts when CTA ``i - S`` has written its output). A CTA runs its
    key/value tiles as ``nk`` chunks: HBM read of the chunk's share of the bytes, then the
    chunk's MMAs + softmax on the SM (``t.pair_cycles`` per pair); the read of chunk ``j``
    waits for the compute of chunk ``j - 2`` (double buffering); then the output block goes
    to HBM. The first chunk carries the Q block. Unequal causal CTAs, the first wave's fill
    and HBM sharing emerge in the engine (the estimate bounds them in closed form).
    """
    # deferred: loads numba (only cycle-level runs and nest searches need it)
    from archsim.sim import TaskGraphBuilder

    q = RESOLUTION
    if t.decode:
        return lower_stream(spec, name, t.read_b, t.write_b, t.alu_ops, t.sfu_ops,
                            clock_hz=f_hz, launches=2)
    f = f_hz
    b = TaskGraphBuilder(clock_hz=f * q)
    b.add_op(name)
    hbm = b.add_bandwidth_memory("hbm", spec.memory.sustained_bytes_per_s / f / q)
    per_head = cta_pairs(op)
    heads = op.batch * op.heads
    sizes = sorted(per_head * heads, reverse=True)
    S = spec.sm_count
    n_real = len(sizes)
    if n_real > max_steps:
        # big grids: the g CTAs an SM runs one after another (positions j, j+S, ... of the
        # round-robin order) become one task chain of their summed work
        g = -(-n_real // max_steps)
        arr = np.zeros(-(-n_real // (g * S)) * g * S)
        arr[:n_real] = sizes
        sizes = [int(x) for x in arr.reshape(-1, g, S).sum(axis=1).ravel() if x > 0]
    n_cta = len(sizes)
    total = float(sum(sizes))
    n_sm = min(S, n_cta)
    sm = [b.add_server(f"sm{i}.tc") for i in range(n_sm)]
    bpe = op.a_format.bytes_per_element
    q_blk = min(op.q_len, FA_BLOCK_Q) * op.head_dim * bpe       # one CTA's Q block
    q_total = q_blk * n_real
    kv_share = max(0.0, t.read_b - q_total)
    o_blk = t.write_b / n_cta
    q_blk *= n_real / n_cta                                       # merged CTAs: their Q blocks
    nk_max = max(1, max_steps // n_cta)
    start = b.add_task(-1, _cyc((spec.kernel_launch_s + spec.dram_latency_ns * 1e-9)
                                * f * q))
    ends: list[int] = []
    for i, pairs in enumerate(sizes):
        kv_tiles = max(1, -(-int(pairs) // (FA_BLOCK_Q * FA_BLOCK_Q)))
        nk = min(kv_tiles, nk_max)
        deps = [start] if i < n_sm else [ends[i - n_sm]]
        cta0 = b.add_join(deps)
        chunk_b = kv_share * pairs / total / nk
        chunk_c = _cyc(t.pair_cycles * pairs / nk * q)
        comps: list[int] = []
        for j in range(nk):
            rd_deps = [cta0] if j < 2 else [comps[j - 2]]
            rd = b.add_read(hbm, max(1, _cyc(chunk_b + (q_blk if j == 0 else 0.0))),
                            deps=rd_deps)
            c_deps = [rd] + ([comps[-1]] if comps else [])
            comps.append(b.add_compute(sm[i % n_sm], chunk_c, deps=c_deps))
        ends.append(b.add_write(hbm, max(1, _cyc(o_blk)), deps=[comps[-1]]))
    b.add_join(ends)
    return b.build()

