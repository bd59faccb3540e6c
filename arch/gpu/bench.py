"""How a GPU benchmark times a kernel, so that a measured figure is compared with the same thing.

Benchmarks that report one kernel's time do not run it back to back with itself: before every
timed call they zero a large buffer to empty the L2 (and some re-randomise the output). Two
effects follow, both modelled here from the unit's own estimates (nothing fitted):

- **Power window.** The memset is memory-bound and cheaper per second than a dense GEMM; it
  alternates with the timed kernel inside the power limiter's averaging window, so a kernel
  shorter than that window averages its power with the memset and runs above its sustained
  (back-to-back) clock (``TensorCoreGpu.in_power_window``, ``arch.gpu.power.solve_clock``).
- **Dirty L2.** The memset leaves the L2's reusable share full of dirty lines; the kernel's own
  reads evict them, so that many bytes are written back to HBM during the kernel. A
  compute-bound kernel hides the write-back; a memory-bound one pays it.

Protocols (sources: the benchmark code):

- ``DO_BENCH``: ``triton.testing.do_bench`` (used by ``benchmarks/silicon/measure.py`` and the
  rows of ``shared/reference/silicon/``): zeroes a 256e6-byte buffer before every call.
- ``MAMF_FINDER_V2``: stas00/ml-engineering ``mamf-finder.py`` v2 (2025-01 to 2025-08, the
  version behind ``gpus.yaml measured_best_gemm_tflops``): before every timed call
  ``l2_cache.zero_()`` on a 256 MiB buffer and ``C.copy_(C_rand)`` re-randomising the output;
  mean of 100 timed calls after 50 warm-ups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Conv2d, Elementwise, Gemm, Op

__all__ = ["FlushProtocol", "DO_BENCH", "MAMF_FINDER_V2", "between_calls", "flush_writeback_s",
           "timed_call_s"]


@dataclass(frozen=True)
class FlushProtocol:
    """What a benchmark runs between two timed calls of a kernel.

    ``flush_bytes``: bytes zeroed to empty the L2 (a write-only memset); ``reset_output``:
    whether the kernel's output is re-randomised by a copy of the same size (read + write)."""

    name: str
    flush_bytes: int
    reset_output: bool = False


DO_BENCH = FlushProtocol("triton.testing.do_bench", 256_000_000)
MAMF_FINDER_V2 = FlushProtocol("mamf-finder v2", 256 * 2**20, reset_output=True)


def _memset(nbytes: int, fmt: str = "fp32", inputs: int = 0) -> Elementwise:
    n = max(1, int(nbytes // FORMATS[fmt].bytes_per_element))
    cols = math.gcd(n, 1 << 10)
    return Elementwise(name="flush", rows=n // cols, cols=cols, fn="copy", inputs=inputs,
                       a_format=FORMATS[fmt])


def _output_elems(op: Op) -> tuple[int, str]:
    """(elements, format) of a GEMM's output (a GEMM writes in its activation format)."""
    g = op.as_gemm() if isinstance(op, Conv2d) else op
    if isinstance(g, Gemm):
        return g.batch * g.m * g.n, g.a_format.name
    return 0, "bf16"


def between_calls(unit: Any, protocol: FlushProtocol, op: Op | None = None
                  ) -> tuple[float, float]:
    """(board joules, seconds) of what ``protocol`` runs between two timed calls of ``op``
    on ``unit`` (the memset, plus the output copy where the protocol re-randomises it)."""
    work = [_memset(protocol.flush_bytes)]
    if protocol.reset_output and op is not None:
        n, fmt = _output_elems(op)
        if n:
            work.append(_memset(int(n * FORMATS[fmt].bytes_per_element), fmt, inputs=1))
    joules = seconds = 0.0
    for w in work:
        e = unit.estimate(w)
        joules += float(e.details.get("power_w", 0.0)) * e.latency_s
        seconds += e.latency_s
    return joules, seconds


def flush_writeback_s(unit: Any, est: Any) -> float:
    """Extra time of a kernel timed right after an L2-flushing memset: up to the L2's reusable
    share (``l2.usable_fraction`` x capacity) of dirty lines is written back to HBM while the
    kernel reads; extra = max(0, hbm_s + wb / BW - body)."""
    s = unit.spec
    wb = min(est.dram_read_bytes, s.l2.l2_bytes * s.l2.usable_fraction)
    hbm_s = float(est.details.get("hbm_s", 0.0))
    body = max(hbm_s, est.latency_s - s.kernel_launch_s)
    return max(0.0, hbm_s + wb / s.memory.sustained_bytes_per_s - body)


def timed_call_s(unit: Any, op: Op, protocol: FlushProtocol = DO_BENCH) -> float:
    """Device time (s) of one timed call of ``op`` as ``protocol`` measures it: the power
    window shared with the flush (units with a power model) and the dirty-L2 write-back."""
    if getattr(unit.spec, "power", None) is not None:
        unit = unit.in_power_window(*between_calls(unit, protocol, op))
    est = unit.estimate(op)
    return float(est.latency_s + flush_writeback_s(unit, est))
