"""Analytical CTA-tile model of a (batched) GEMM on a tensor-core GPU.

For every candidate CTA tile ``bm x bn x bk`` and split-K factor ``s`` (the candidate set
does not depend on the shape, so the minimum over it stays monotone in M, N, K):

* per k-step of one CTA (cycles of the tensor clock)::

      t_mma  = bm*bn*bk*passes / (rate_per_sm * mma_efficiency * sparse_speedup)
      t_smem = (smem operand reads by the MMA groups + stage fill) / smem_bytes_per_clock
      t_cvt  = (A, B elements converted / dequantised) / int32_lanes_per_sm
      t_load = (A + B stage bytes moved) / load_bytes_per_clock     (L2 -> SM path; rows
               and columns of a tile beyond M, N are predicated off and move no bytes)
      t_lat  = dram_latency / ((stages - 1) * co_resident_ctas)     (Little's law)
      t_k    = max(t_mma, t_smem, t_cvt, t_load, t_lat)

* split-K (``s`` > 1) only when the tile grid underfills the SMs (cuBLAS/CUTLASS heuristic;
  the candidate set then shrinks as M, N grow, which keeps the minimum monotone); with
  ``sm.stream_k`` (Hopper) a persistent stream-K candidate divides all k-iterations evenly
  over the SMs (plus the fix-up of partial tiles);
* SM time: ``ceil(tiles * s / SMs)`` CTAs per SM (wave quantisation; co-resident CTAs
  share the SM, so the busiest SM's CTA count sets the time) x ``ksteps * t_k`` plus the
  epilogue (C tile store) when it cannot overlap another CTA; a CTA that follows another
  on its SM with no co-resident CTA also exposes :data:`TILE_SWITCH_ROUND_TRIPS` DRAM
  latencies (the previous CTA's store drain, its own pipeline fill);
* L2 time: all stage bytes (one operand divided by the cluster multicast) / L2 bandwidth;
* HBM time: the L2-reuse model below / (bandwidth x efficiency);
* total = launch overhead + pipeline fill (one DRAM latency) + max(SM, L2, HBM);
* energy: the MMAs of a ragged tile's rows beyond M / columns beyond N run on the zeros the
  loads fill in (TMA out-of-bounds fill, ``cp.async`` zero-fill): they take MMA time but
  toggle nothing, so they carry no dynamic energy (``GemmResult.zero_macs``; what a
  power-capped clock sees).

L2 reuse (HBM bytes): an operand that fits in the usable L2 is fetched once. Otherwise the
grid is rasterised in groups of ``g`` tile rows (CUTLASS swizzle): B is re-fetched once
per row group; A once in total if a group's A panels fit in L2, else once per column
block of ``P/g`` tiles (P = concurrent CTAs). The best ``g`` (and the transposed raster)
is taken. See ``docs/gpu.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from archsim.arch.base import ceil_div
from archsim.arch.gpu.precision import MmaPlan
from archsim.arch.gpu.spec import GpuSpec

__all__ = ["GemmShape", "GemmResult", "gemm_time", "TILE_M", "TILE_N", "TILE_K_BYTES", "SPLITS",
           "TILE_SWITCH_ROUND_TRIPS"]

TILE_M = (16, 32, 64, 128, 256)
TILE_N = (32, 64, 128, 256)
TILE_K_BYTES = (64, 128)          # bytes of one k-row of the operand per stage
SPLITS = (1, 2, 4, 8, 16)
_GROUPS = (1, 2, 4, 8, 16, 32, 64)
_ACC_BYTES = 4                    # fp32 / int32 accumulators
_RF_ACC_FRACTION = 0.5            # registers left for accumulators (rest: fragments, addresses)

#: DRAM round trips a CTA exposes when it follows another CTA on its SM with no co-resident
#: CTA to overlap them (``ctas_per_sm`` = 1, one CTA per tile): the finished CTA's epilogue
#: stores drain before it exits and frees the SM (TMA store wait: one write round trip),
#: and the next CTA starts its loads only once it is launched (pipeline fill: one load
#: round trip before its first MMA). The first CTA's fill is the ``lat_cyc`` every kernel
#: pays. A persistent stream-K CTA keeps the SM and prefetches the next tile's stages
#: during the epilogue, so it pays none. A count from the mechanism, not a fitted scale: on
#: the fit half of ``kernels_h100/gemm.csv.gz`` (K a power of two; the table's switching
#: activity refitted for each) 0, 1, 2, 3, 4 round trips give bf16 + fp8 median |error|
#: 9.6 + 10.6, 9.2 + 9.8, 8.7 + 7.4, 8.5 + 9.6, 8.7 + 10.9 % (docs/gpu.md "GEMM kernel
#: choice").
TILE_SWITCH_ROUND_TRIPS = 2


#: INT32 instructions per element to expand a bitmap-encoded sparse weight tile into its
#: dense shared-memory tile (SpInfer's register decode): test the element's presence bit,
#: count the set bits below it (``popc`` of the masked word: the offset of its value among
#: the tile's non-zeros), select the value or zero. An instruction count, not a fit.
SPARSE_EXPAND_OPS_PER_ELEMENT = 3


@dataclass(frozen=True)
class GemmShape:
    """What the tile model needs of a GEMM.

    Attributes:
        batch, m, n, k: dimensions (``batch`` independent GEMMs).
        a_bpe, b_bpe, c_bpe: bytes per element of A, B (storage, with scales), C.
        a_hbm_bytes: compulsory off-chip bytes of A (im2col convs: the real input).
        b_hbm_bytes: compulsory off-chip bytes of all distinct B matrices.
        b_distinct: number of distinct B matrices (batch / b_shared; 1 for shared weights).
        c_hbm_bytes: bytes of C written (0 when the consumer keeps it on chip).
        sparse_speedup: MMA rate multiplier (2:4 sparse tensor cores), else 1.
        b_expand_bpe: B arrives compressed (unstructured sparse weights, ``b_bpe`` bytes per
            dense element) and each CTA expands its tile into shared memory at this width
            before dense MMAs (Flash-LLM / SpInfer); 0: B is used as loaded.
        b_expand_ops: INT32 ops per B element of the expansion (per CTA, per k-step).
    """

    batch: int
    m: int
    n: int
    k: int
    a_bpe: float
    b_bpe: float
    c_bpe: float
    a_hbm_bytes: float
    b_hbm_bytes: float
    b_distinct: int
    c_hbm_bytes: float
    sparse_speedup: float = 1.0
    b_expand_bpe: float = 0.0
    b_expand_ops: float = 0.0


@dataclass(frozen=True)
class GemmResult:
    """The best candidate's timing (seconds) and traffic (bytes)."""

    time_s: float
    sm_s: float
    l2_s: float
    hbm_s: float
    hbm_read_bytes: float
    hbm_write_bytes: float
    l2_bytes: float
    smem_bytes: float
    mma_macs: float          # MACs issued to the datapath (with padding and passes)
    convert_ops: float
    bm: int
    bn: int
    bk: int
    split: int
    stages: int
    ctas_per_sm: int
    waves: int
    bound: str
    stream_k: bool = False
    # ---- per-CTA kernel structure, for the cycle-level lowering (arch.gpu.lower) ----
    f_hz: float = 0.0            # clock of the cycle counts below (tensor clock)
    t_core: float = 0.0          # cycles per k-step on the SM datapath: max(MMA, smem, convert)
    stage_bytes: float = 0.0     # A + B bytes moved per k-step stage (L2 -> shared memory)
    ksteps: int = 0              # k-steps per CTA (stream-k: per persistent CTA)
    n_cta: int = 0               # CTAs in the grid (stream-k: one per SM)
    epi_bytes: float = 0.0       # C tile bytes stored by one CTA's epilogue
    split_bytes: float = 0.0     # fp32 partial-tile bytes stored + reloaded per split CTA
    lat_cyc: float = 0.0         # DRAM latency in cycles
    # of mma_macs: MACs on the zero-filled padding of ragged tiles (rows beyond M, columns
    # beyond N: TMA / cp.async zero-fill), which toggle no datapath (no dynamic energy)
    zero_macs: float = 0.0
    launch_s: float = 0.0        # kernel launch overhead (0 when fused)

    def describe(self) -> str:
        s = f" splitk={self.split}" if self.split > 1 else ""
        s += " stream-k" if self.stream_k else ""
        return f"tile {self.bm}x{self.bn}x{self.bk} stages={self.stages}{s} waves={self.waves}"


def _hbm_reads(spec: GpuSpec, g: GemmShape, bm: int, bn: int, conc: int) -> float:
    """Off-chip read bytes of A and B under the L2-reuse model (see module docstring)."""
    l2u = spec.l2.l2_bytes * spec.l2.usable_fraction
    tm, tn = ceil_div(g.m, bm), ceil_div(g.n, bn)
    a1 = g.a_hbm_bytes / g.batch                 # per batch entry
    b1 = g.b_hbm_bytes / g.b_distinct            # per distinct B
    if a1 + b1 <= l2u:
        return g.a_hbm_bytes + g.b_hbm_bytes
    best = math.inf
    # rows-first raster (A row panels resident, B re-streamed per row group) and transposed
    for grp in _GROUPS:
        for transposed in (False, True):
            if not transposed:
                x_panel, x1, tx, y1, ty = bm * g.k * g.a_bpe, a1, tm, b1, tn
            else:
                x_panel, x1, tx, y1, ty = bn * g.k * g.b_bpe, b1, tn, a1, tm
            rows = min(grp, tx)
            cols = max(1, conc // rows)
            x_reads = x1 if (rows * x_panel <= l2u or x1 <= l2u) else x1 * ceil_div(ty, cols)
            y_reads = y1 if y1 <= l2u else y1 * ceil_div(tx, grp)
            a_r, b_r = (x_reads, y_reads) if not transposed else (y_reads, x_reads)
            best = min(best, a_r * g.batch + b_r * g.b_distinct)
    return max(g.a_hbm_bytes + g.b_hbm_bytes, best)


def gemm_time(spec: GpuSpec, g: GemmShape, plan: MmaPlan, *,
              tiles: tuple[tuple[int, int, int], ...] | None = None,
              splits: tuple[int, ...] = SPLITS, launch: bool = True,
              rank: Callable[[GemmResult], float] | None = None) -> GemmResult:
    """Best (fastest) candidate for ``g`` with ``plan``; ``tiles``/``splits`` restrict the search.

    ``tiles`` entries are ``(bm, bn, bk_bytes)``; ``launch=False`` for a GEMM fused into
    the previous kernel (flash attention's AV). ``rank`` (default: the time at the tensor
    clock) orders the candidates; a power-capped GPU ranks by the latency at each
    candidate's own sustained clock (``arch.gpu.power``).
    """
    tcs = spec.tensor_core
    f_hz = (spec.tensor_clock_mhz if plan.tensor else spec.clock_mhz) * 1e6
    eta = tcs.mma_efficiency if plan.tensor else 1.0
    rate = plan.rate_per_sm * eta * (g.sparse_speedup if plan.tensor else 1.0)
    lat_cyc = spec.dram_latency_ns * 1e-9 * f_hz
    sms = spec.sm_count
    smem_cap = spec.sm.smem_bytes_per_sm
    hbm_bw = spec.memory.sustained_bytes_per_s
    l2_bw = spec.l2.bandwidth_gbps * 1e9 * (f_hz / spec.clock_hz)   # L2 runs on the SM clock
    launch_s = spec.kernel_launch_s if launch else 0.0
    # the library GEMM's (cuBLAS, tensor-core path) split-K partial sums are added by a
    # second kernel queued behind it (splitKreduce): its back-to-back launch and one memory
    # round trip. Custom kernels (W4A16 dequant, bit-serial, SIMT) reduce inside the kernel.
    b2b_us = spec.launch_b2b_us if spec.launch_b2b_us is not None else spec.launch_overhead_us
    reduce_s = (b2b_us * 1e-6 + spec.dram_latency_ns * 1e-9) if plan.path == "tc" else 0.0
    int_lanes = spec.cuda_core.int32_lanes_per_sm
    mc = spec.sm.cluster_multicast
    if tiles is None:
        tiles = tuple((bm, bn, kb) for bm in TILE_M for bn in TILE_N for kb in TILE_K_BYTES)
    best: GemmResult | None = None
    best_key = math.inf
    for bm, bn, kb in tiles:
        bk = max(1, kb * 8 // plan.operand_bits)
        acc = bm * bn * _ACC_BYTES
        if acc > spec.sm.regfile_bytes_per_sm * _RF_ACC_FRACTION:
            continue
        stage = bm * bk * g.a_bpe + bk * bn * g.b_bpe
        expand = bk * bn * g.b_expand_bpe          # the expanded B tile (sparse weights)
        stages = min(spec.sm.max_stages, int((smem_cap - expand) // stage))
        if stages < 2:
            continue
        cta_cap = max(1, min(int(smem_cap // (stages * stage + expand)),
                             int(spec.sm.regfile_bytes_per_sm * _RF_ACC_FRACTION // acc)))
        wm, wn = min(bm, spec.sm.mma_tile_m), min(bn, spec.sm.mma_tile_n)
        b_mma_bpe = g.b_expand_bpe or g.b_bpe      # B as the warps' fragment loads read it
        smem_k = (bk * g.a_bpe * bm * ceil_div(bn, wn) + bk * b_mma_bpe * bn * ceil_div(bm, wm)
                  + stage + expand)
        t_mma = bm * bn * bk * plan.passes / rate
        t_smem = smem_k / spec.sm.smem_bytes_per_clock
        conv = (bm * bk * plan.a_convert_ops + bk * bn * plan.b_convert_ops * ceil_div(bm, wm)
                + bk * bn * g.b_expand_ops)
        t_cvt = conv / int_lanes
        # rows / columns beyond M / N are predicated off: they occupy shared memory and
        # MMA slots but move no bytes from L2 (nor to it in the epilogue)
        em, en = min(bm, g.m), min(bn, g.n)
        moved = em * bk * g.a_bpe + bk * en * g.b_bpe
        t_load = moved / spec.sm.load_bytes_per_clock
        t_epi = em * en * g.c_bpe / spec.sm.load_bytes_per_clock
        tiles_mn = g.batch * ceil_div(g.m, bm) * ceil_div(g.n, bn)
        # share of the issued MMAs that fall on the ragged tiles' zero-filled padding
        pad = 1.0 - (g.m * g.n) / (ceil_div(g.m, bm) * bm * ceil_div(g.n, bn) * bn)
        ksteps_full = ceil_div(g.k, bk)
        forced = splits != SPLITS   # a mapping asked for these splits: no heuristic filter
        options: list[tuple[int, bool]] = [(x, False) for x in splits
                                           if x == 1 or tiles_mn < sms or forced]
        if spec.sm.stream_k and splits == SPLITS and tiles_mn >= sms:
            options.append((1, True))
        for s, streamk in options:
            ksteps = ceil_div(ceil_div(g.k, s), bk)
            n_cta = tiles_mn * s
            if streamk:
                # persistent CTAs, one per SM, each taking an equal share of all k-iterations;
                # at most two partial tiles per SM are fixed up through fp32 partials.
                co = 1
                t_k = max(t_mma, t_smem, t_cvt, t_load, lat_cyc / (stages - 1))
                iters = ceil_div(tiles_mn * ksteps_full, sms)
                t_fix = 2 * bm * bn * _ACC_BYTES * 2 / spec.sm.load_bytes_per_clock
                tiles_per_sm = ceil_div(tiles_mn, sms)
                sm_cyc = iters * t_k + tiles_per_sm * t_epi + t_fix + lat_cyc
                n_work = tiles_mn * ksteps_full
                part = float(min(tiles_mn, sms)) * bm * bn * _ACC_BYTES
            else:
                per_sm = ceil_div(n_cta, sms)
                co = max(1, min(cta_cap, per_sm))
                t_k = max(t_mma, t_smem, t_cvt, t_load, lat_cyc / ((stages - 1) * co))
                # serial split-K: each split stores / reloads an fp32 partial tile
                t_split = bm * bn * _ACC_BYTES * 2 / spec.sm.load_bytes_per_clock if s > 1 else 0.0
                # a lone CTA's epilogue, store drain and the next CTA's pipeline fill
                # cannot hide behind another CTA's mainloop; the last CTA's epilogue
                # and the first pipeline fill are always exposed
                epi = ((per_sm - 1) * (t_epi + TILE_SWITCH_ROUND_TRIPS * lat_cyc)
                       if co == 1 else 0.0)
                sm_cyc = per_sm * (ksteps * t_k + t_split) + epi + t_epi + lat_cyc
                n_work = n_cta * ksteps
                part = g.batch * g.m * g.n * _ACC_BYTES * s if s > 1 else 0.0
            sm_s = sm_cyc / f_hz
            # traffic
            l2_bytes = n_work * (em * bk * g.a_bpe + bk * en * g.b_bpe / mc)
            l2_bytes += 2 * part + g.c_hbm_bytes
            reads = _hbm_reads(spec, g, bm, bn, min(n_cta, sms * co))
            writes = g.c_hbm_bytes
            if part > spec.l2.l2_bytes * spec.l2.usable_fraction:
                reads += part
                writes += part
            hbm_s = (reads + writes) / hbm_bw
            l2_s = l2_bytes / l2_bw
            body = max(sm_s, l2_s, hbm_s)
            fixed = launch_s + (reduce_s if s > 1 and launch and not streamk else 0.0)
            total = fixed + body
            # rank(c) >= c.time_s (a capped clock only slows a kernel): prune on the time
            if best is not None and total >= best_key - 1e-15:
                continue
            bound = "compute" if body == sm_s else ("memory" if body == hbm_s else "l2")
            if body == sm_s and t_k > t_mma * 1.0001:
                bound = "feed"
            cand = GemmResult(
                total, sm_s, l2_s, hbm_s, reads, writes, l2_bytes,
                n_work * smem_k,
                float(n_work) * bm * bn * bk * plan.passes,
                float(n_work) * conv, bm, bn, bk, s, stages, co,
                ceil_div(n_cta, sms * co), bound, streamk,
                f_hz=f_hz, t_core=max(t_mma, t_smem, t_cvt), stage_bytes=moved,
                ksteps=(ceil_div(tiles_mn * ksteps_full, sms) if streamk else ksteps),
                n_cta=(min(tiles_mn, sms) if streamk else n_cta),
                epi_bytes=em * en * g.c_bpe,
                split_bytes=(2 * bm * bn * _ACC_BYTES * 2 if streamk else
                             (bm * bn * _ACC_BYTES * 2 if s > 1 else 0.0)),
                lat_cyc=lat_cyc, launch_s=fixed,
                zero_macs=float(n_work) * bm * bn * bk * plan.passes * pad)
            key = rank(cand) if rank is not None else total
            if best is None or key < best_key - 1e-15:
                best, best_key = cand, key
    if best is None:
        raise ValueError("no feasible CTA tile (shared memory or registers too small)")
    return best
