"""``arch.vector.estimate_vector``: the streaming roofline of a vector op, worked by hand."""

from __future__ import annotations

import math

from archsim.arch.vector import estimate_vector
from archsim.workloads.ops import AllReduce, Elementwise, Embedding, Softmax


def _est(op, lanes, bpc):
    return estimate_vector(op, unit="u", clock_hz=1e9, lanes=lanes, bytes_per_cycle=bpc,
                           vector_component="u.vec", dram_component="u.dram")


def test_memory_bound_add():
    # 1024 x 1024 fp16 add of 2 inputs: 1 op/element -> 1 048 576 ops; reads 2 x 2 MiB,
    # writes 2 MiB = 6 291 456 B. 64 lanes: 16 384 cycles; 64 B/cycle: 98 304 cycles.
    op = Elementwise(name="a", rows=1024, cols=1024, fn="add", inputs=2)
    e = _est(op, 64, 64.0)
    assert e.cycles == 98_304 and e.bound == "memory"
    assert e.dram_read_bytes == 4 * 2**20 and e.dram_write_bytes == 2 * 2**20
    assert e.actions[("u.vec", "op")] == 2**20
    assert e.actions[("u.dram", "read")] == 4 * 2**20
    assert e.actions[("u.dram", "write")] == 2 * 2**20
    assert math.isclose(e.utilization, 2**20 / (98_304 * 64))
    assert e.dataflow == e.mapping == "vector" and e.unit == "u" and e.clock_hz == 1e9


def test_compute_bound_softmax_rounds_up():
    # 3 x 100 fp16 softmax: 5 ops/element -> 1500 ops on 7 lanes = 214.29 -> 215 cycles;
    # 600 B read + 600 B written at 1024 B/cycle = 1.17 cycles.
    op = Softmax(name="s", rows=3, cols=100)
    e = _est(op, 7, 1024.0)
    assert e.cycles == 215 and e.bound == "compute"
    assert math.isclose(e.utilization, 1500 / (215 * 7))


def test_one_device_all_reduce_moves_nothing_and_embedding_is_named():
    ar = _est(AllReduce(name="r", elements=4096), 16, 8.0)
    assert ar.dram_read_bytes == ar.dram_write_bytes == 0.0
    emb = _est(Embedding(name="e", tokens=8, dim=64, vocab=1000), 16, 8.0)
    assert emb.dataflow == emb.mapping == "embedding"
    # 8 rows x 64 x 2 B gathered + 8 x 64 x 2 B written = 2048 B at 8 B/cycle = 256 cycles
    assert emb.cycles == 256 and emb.bound == "memory"
