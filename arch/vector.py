"""Streaming estimate of a vector op on a unit with ``lanes`` vector lanes and one DRAM port.

Used by the families whose non-matrix ops (softmax, norms, element-wise, embedding
gathers, a one-device all-reduce) run on a row of vector lanes fed straight from DRAM
(spatial arrays, the N:M sparse FPGA). The op streams once: its inputs and weights are
read and its output written over the sustained DRAM bandwidth while the lanes do one
element operation each per cycle, so

    cycles = ceil(max(vector_ops / lanes, (read_bytes + write_bytes) / bytes_per_cycle))

(the roofline of the op on the unit; compute and memory overlap fully). An all-reduce
over one device moves nothing. Actions: ``(vector_component, "op")`` = vector_ops,
``(dram_component, "read" / "write")`` = bytes.
"""

from __future__ import annotations

from types import MappingProxyType

from archsim.arch.base import Estimate, cycles_of
from archsim.workloads.ops import AllReduce, Embedding, Op

__all__ = ["estimate_vector"]


def estimate_vector(op: Op, *, unit: str, clock_hz: float, lanes: int,
                    bytes_per_cycle: float, vector_component: str,
                    dram_component: str) -> Estimate:
    """Estimate of a vector op streamed through ``lanes`` vector lanes (module docstring).

    Args:
        op: a non-matrix op (``op.vector_ops()`` element operations).
        unit: the unit's name (``Estimate.unit``).
        clock_hz: the unit's clock in Hz; cycles are counted in it.
        lanes: vector lanes (element operations per cycle), >= 1.
        bytes_per_cycle: sustained DRAM bandwidth in bytes per unit cycle, > 0.
        vector_component: component charged one ``op`` action per element operation.
        dram_component: component charged the ``read`` and ``write`` bytes.

    Returns:
        The estimate; dataflow and mapping ``"embedding"`` for an Embedding, else
        ``"vector"``; bound ``"compute"`` when vector_ops / lanes >= the memory time.
    """
    ops = op.vector_ops()
    compute = ops / lanes
    read_b = op.input_bytes() + op.weight_bytes()
    write_b = op.output_bytes()
    if isinstance(op, AllReduce):       # devices == 1: nothing moves
        read_b = write_b = 0.0
    mem = (read_b + write_b) / bytes_per_cycle
    cycles = cycles_of(max(compute, mem))
    actions = {(vector_component, "op"): float(ops),
               (dram_component, "read"): read_b,
               (dram_component, "write"): write_b}
    df = "embedding" if isinstance(op, Embedding) else "vector"
    return Estimate(op.name, op.kind, unit, df, cycles, clock_hz, flops=op.flops(),
                    dram_read_bytes=read_b, dram_write_bytes=write_b,
                    actions=MappingProxyType(actions),
                    utilization=(ops / (cycles * lanes)) if cycles else 0.0,
                    bound="compute" if compute >= mem else "memory", mapping=df)
