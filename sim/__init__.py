"""archsim cycle simulator core: TaskGraph, event engine (Numba), command-level DRAM.

Depends only on numpy and numba. Typical use::

    from sim import TaskGraphBuilder, run
    b = TaskGraphBuilder(clock_hz=1e9)
    pe = b.add_server("pe", capacity=2)
    a = b.add_compute(pe, 10)
    b.add_compute(pe, 5, deps=[a])
    stats = run(b.build())
"""

from sim.dram import (
    DramSpec,
    DramState,
    DramStats,
    DramTraceResult,
    dram_preset,
    encode_address,
    peak_bytes_per_s,
    simulate_requests,
)
from sim.dram_presets import COMMANDS, JEDEC_TIMING_TABLE, PRESETS
from sim.engine import SimStats, run
from sim.errors import DramConfigError, SimInputError, TaskGraphError
from sim.taskgraph import (
    KIND_COMPUTE,
    KIND_READ,
    KIND_WRITE,
    MODEL_BANDWIDTH,
    MODEL_DRAM,
    MODEL_SERVER,
    TaskGraph,
    TaskGraphBuilder,
)
from sim.trace import write_chrome_trace

__all__ = [
    "COMMANDS", "JEDEC_TIMING_TABLE", "KIND_COMPUTE", "KIND_READ", "KIND_WRITE",
    "MODEL_BANDWIDTH", "MODEL_DRAM", "MODEL_SERVER", "PRESETS", "DramConfigError",
    "DramSpec", "DramState", "DramStats", "DramTraceResult", "SimInputError", "SimStats",
    "TaskGraph", "TaskGraphBuilder", "TaskGraphError", "dram_preset", "encode_address", "peak_bytes_per_s",
    "run", "simulate_requests", "write_chrome_trace",
]
