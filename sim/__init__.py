"""archsim cycle simulator core: TaskGraph, event engine (Numba), command-level DRAM.

Depends only on numpy and numba. Typical use::

    from archsim.sim import TaskGraphBuilder, run
    b = TaskGraphBuilder(clock_hz=1e9)
    pe = b.add_server("pe", capacity=2)
    a = b.add_compute(pe, 10)
    b.add_compute(pe, 5, deps=[a])
    stats = run(b.build())
"""

import importlib
from typing import Any

#: public name -> defining submodule. Imported lazily (PEP 562) so that importing a light
#: submodule (``sim.dram_presets``, used by config specs) does not load Numba: analytical
#: commands start ~0.2 s faster.
_WHERE = {
    "DramSpec": "dram", "DramState": "dram", "DramStats": "dram", "DramTraceResult": "dram",
    "dram_preset": "dram", "encode_address": "dram", "peak_bytes_per_s": "dram",
    "simulate_requests": "dram",
    "COMMANDS": "dram_presets", "JEDEC_TIMING_TABLE": "dram_presets", "PRESETS": "dram_presets",
    "SimStats": "engine", "run": "engine",
    "DramConfigError": "errors", "SimInputError": "errors", "TaskGraphError": "errors",
    "KIND_COMPUTE": "taskgraph", "KIND_READ": "taskgraph", "KIND_WRITE": "taskgraph",
    "MODEL_BANDWIDTH": "taskgraph", "MODEL_DRAM": "taskgraph", "MODEL_SERVER": "taskgraph",
    "TaskGraph": "taskgraph", "TaskGraphBuilder": "taskgraph",
    "write_chrome_trace": "trace",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"archsim.sim.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_WHERE))
