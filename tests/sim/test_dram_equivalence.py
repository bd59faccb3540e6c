"""The fast FR-FCFS controller makes exactly the choices of the straightforward one.

``sim_legacy_dram.py`` is a frozen copy of the first controller (full queue rescan per
decision, every active stream re-fed per freed slot). On random traces (random,
sequential and few-row address mixes; reads and writes; staggered arrivals; open and
closed page; with and without refresh; small and large queues and stream windows) both
must give the same completion cycle for every request and the same counters.
"""

from __future__ import annotations

import os
import sys
import zlib

import numpy as np
import pytest

from archsim.sim import dram_preset, simulate_requests
from archsim.sim.dram_kernel import N_CMD

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # top-level: Numba caches it
from sim_legacy_dram import simulate as legacy_simulate  # noqa: E402

CASES = [
    ("DDR4-2400", {}),
    ("DDR4-2400", {"row_policy": "closed"}),
    ("DDR4-2400", {"ranks": 2, "queue_depth": 8}),
    ("HBM2e", {}),
    ("HBM3", {"refresh": False}),
    ("GDDR6", {}),
    ("GDDR6", {"queue_depth": 4, "row_policy": "closed"}),
    ("GDDR6", {"rows": 1000, "channels": 3}),  # not a power of two: div/mod decoding
]


def _trace(spec, kind: int, n: int, rng: np.random.Generator) -> np.ndarray:
    nb = spec.capacity_bytes() // spec.burst_bytes
    if kind == 0:  # uniform random bursts
        idx = rng.integers(0, nb, n)
    elif kind == 1:  # one sequential stream from a random start
        idx = np.arange(n) + rng.integers(0, nb - n)
    else:  # a few hot rows: many hits and conflicts
        idx = (rng.integers(0, 8, n) * spec.bursts_per_row * 7 + rng.integers(0, 4, n)) % nb
    return idx.astype(np.int64) * spec.burst_bytes


@pytest.mark.parametrize("name,kw", CASES)
@pytest.mark.parametrize("kind", [0, 1, 2])
def test_fast_controller_equals_reference(name: str, kw: dict, kind: int) -> None:
    spec = dram_preset(name, **kw)
    rng = np.random.default_rng(zlib.crc32(f"{name}{kw}{kind}".encode()))
    n = 1500
    addr = _trace(spec, kind, n, rng)
    wr = rng.random(n) < 0.3
    arrival = np.sort(rng.integers(0, 3 * n, n)) if kind != 1 else np.zeros(n, np.int64)
    for window in (1, 16, 256):
        end, stats = legacy_simulate(spec, addr, wr, arrival, window)
        res = simulate_requests(spec, addr, wr, arrival, max_outstanding=window)
        np.testing.assert_array_equal(res.completion_cycles, end)
        s = res.stats
        assert list(s.command_counts.values()) == stats[:N_CMD].tolist()
        assert [s.row_hits, s.row_misses, s.row_conflicts, s.read_bytes, s.write_bytes] == \
            stats[N_CMD:].tolist()
