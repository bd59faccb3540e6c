"""Cycle-level lowering of ``nm_sparse_fpga`` ops to ``sim.TaskGraph`` (fold-chunk granularity).

Resources (clock = the design clock): the PE array (``array``, one chunk at a time), the
sparse-weight generator (``pregen``), the vector unit (``vector``) and DDR4 (``ddr``: a
bandwidth server at the sustained rate for ``memory.model: bandwidth``, or the
command-level DRAM of ``sim.dram`` with the config's preset and ``ddr_channels`` channels
for ``memory.model: dram``).

A GEMM is the estimate's schedule (``unit.plan``) cut into ``C`` equal chunks of its
folds (``C = min(batch x folds x m_tiles, MAX_CHUNKS)``): the first stationary tile is
loaded, then per chunk ``read -> compute -> write``; chunk ``i``'s read waits for chunk
``i-2``'s compute (double-buffered buffers), computes run in order. Pre-generation adds its
DRAM bytes to the chunks' transfers and its generator time as per-chunk tasks beside the
array (``pregen.overlap``) or, without overlap, is a phase before the first chunk (its DRAM
read and write beside its generator time).
Vector ops are ``C`` read -> vector -> write pipelines. Contention between the array and
DRAM emerges in the event engine; ``tests/fpga/test_lower.py`` checks the estimate
against it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from archsim.workloads.ops import Conv2d, Gemm

__all__ = ["lower_op", "MAX_CHUNKS"]

#: Upper bound on chunks per op (3-4 tasks each).
MAX_CHUNKS = 256


def _split(total: float, parts: int) -> np.ndarray:
    """``total`` (rounded up) split into ``parts`` integers that sum to it."""
    t = int(math.ceil(total - 1e-9)) if total > 0 else 0
    edges = np.floor(np.linspace(0, t, parts + 1) + 1e-9).astype(np.int64)
    return np.diff(edges)


def lower_op(unit: Any, op: Any) -> tuple[Any, list[Any]]:
    """(TaskGraph, dram_configs) of ``op`` on ``unit`` (an ``NmSparseFpga``)."""
    # deferred: loads numba (only cycle-level runs and nest searches need it)
    from archsim.sim import TaskGraphBuilder
    from archsim.sim.taskgraph import KIND_READ, KIND_WRITE

    s = unit.spec
    b = TaskGraphBuilder(clock_hz=unit.clock_hz)
    oi = b.add_op(op.name)
    mem = s.memory
    dram_cfgs: list[Any] = []
    if mem.model == "dram":
        # deferred: loads numba (only cycle-level runs and nest searches need it)
        from archsim.sim import dram_preset

        dram_cfgs.append(dram_preset(mem.preset, channels=s.ddr_channels))
        ddr = b.add_dram("ddr", 0, capacity=8)
    else:
        ddr = b.add_bandwidth_memory("ddr", mem.bytes_per_s / unit.clock_hz, mem.efficiency)
    est = unit.estimate(op)
    g = op.as_gemm() if isinstance(op, Conv2d) else op
    if isinstance(g, Gemm):
        array = b.add_server("array")
        plan = unit.plan(g)
        pg_cycles, pg_read, pg_write = unit.pregen_cost(g, plan)
        chunks = max(1, min(g.batch * plan.folds * plan.m_tiles, MAX_CHUNKS))
        compute = _split(g.batch * plan.compute_cycles, chunks)
        first_b = plan.first_elems * max(g.a_format.bytes_per_element,
                                         g.b_format.bytes_per_element)
        # without overlap the generator's DRAM traffic is its own phase, not the chunks'
        serial_pg = bool(pg_cycles) and not s.pregen.overlap
        chunk_read = est.dram_read_bytes - (pg_read if serial_pg else 0.0)
        chunk_write = est.dram_write_bytes - (pg_write if serial_pg else 0.0)
        reads = _split(max(chunk_read - first_b, 0.0), chunks)
        first = b.add_task(ddr, kind=KIND_READ, mem_bytes=int(math.ceil(first_b)), op=oi)
        gate = [first]
        if pg_cycles:
            gen = b.add_server("pregen")
            if serial_pg:
                pr = b.add_task(ddr, kind=KIND_READ, mem_bytes=int(math.ceil(pg_read)),
                                mem_addr=1 << 42, op=oi)
                # the generator streams: its DRAM traffic and its lanes overlap each other
                pc = b.add_compute(gen, int(math.ceil(pg_cycles)), op=oi)
                pw = b.add_task(ddr, kind=KIND_WRITE, mem_bytes=int(math.ceil(pg_write)),
                                mem_addr=1 << 43, op=oi, deps=[pr])
                gate = [first, pc, pw]
            else:
                for d in _split(pg_cycles, chunks):
                    b.add_compute(gen, int(d), op=oi)
        writes = _split(chunk_write, chunks)
        addr_r, addr_w = 0, 1 << 40
        comp: list[int] = []
        for i in range(chunks):
            deps = list(gate) + ([comp[i - 2]] if i >= 2 else [])
            r = b.add_task(ddr, kind=KIND_READ, mem_bytes=int(reads[i]), mem_addr=addr_r,
                           op=oi, deps=deps)
            addr_r += int(reads[i])
            c = b.add_compute(array, int(compute[i]), deps=[r] + comp[-1:], op=oi)
            comp.append(c)
            if writes[i]:
                b.add_task(ddr, kind=KIND_WRITE, mem_bytes=int(writes[i]), mem_addr=addr_w,
                           op=oi, deps=[c])
                addr_w += int(writes[i])
        return b.build(), dram_cfgs
    vec = b.add_server("vector")
    ops = op.vector_ops()
    chunks = MAX_CHUNKS if ops or est.dram_bytes else 1
    compute = _split(ops / unit.lanes, chunks)
    reads, writes = _split(est.dram_read_bytes, chunks), _split(est.dram_write_bytes, chunks)
    prev: list[int] = []
    addr_r, addr_w = 0, 1 << 40
    for i in range(chunks):
        r = b.add_task(ddr, kind=KIND_READ, mem_bytes=int(reads[i]), mem_addr=addr_r, op=oi,
                       deps=prev[-2:-1])
        addr_r += int(reads[i])
        c = b.add_compute(vec, int(compute[i]), deps=[r] + prev[-1:], op=oi)
        prev.append(c)
        if writes[i]:
            b.add_task(ddr, kind=KIND_WRITE, mem_bytes=int(writes[i]), mem_addr=addr_w, op=oi,
                       deps=[c])
            addr_w += int(writes[i])
    return b.build(), dram_cfgs
