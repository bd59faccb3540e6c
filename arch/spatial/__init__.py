"""Generic spatial-array family (``kind: spatial_array``): systolic / NVDLA / ShiDianNao /
Eyeriss-like PE arrays with a global buffer and off-chip memory.

Modules: ``unit`` (the spec, the SCALE-Sim fold model, loop-nest mappings, the registered
:class:`SpatialArray`), ``lower`` (fold-level lowering to ``sim.TaskGraph``), ``reference``
(golden workloads and validation checks of the family).
"""

from archsim.arch.spatial.unit import (
    DATAFLOWS,
    SpatialArray,
    SpatialArraySpec,
    SpatialMapping,
    fold_cycles,
    gemm_traffic,
)

__all__ = ["SpatialArraySpec", "SpatialArray", "SpatialMapping", "DATAFLOWS", "fold_cycles",
           "gemm_traffic"]

import archsim.arch.spatial.reference  # noqa: E402,F401  (registers golden workloads and checks)
