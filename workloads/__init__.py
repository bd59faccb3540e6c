"""Workloads: ops, number formats, sparsity, network graphs, model zoo, importers.

The lowest layer of archsim; it also holds the error family (``workloads.errors``) and
the strict YAML loader (``workloads.yamlio``) that every layer above uses.
"""

from archsim.workloads.errors import (
                           ArchsimError,
                           ConfigError,
                           MappingError,
                           Problem,
                           SpecError,
                           WorkloadError,
)
from archsim.workloads.formats import FORMATS, NumberFormat, get_format
from archsim.workloads.graph import PHASES, Workload
from archsim.workloads.ops import (
                           AllReduce,
                           Conv2d,
                           Elementwise,
                           Embedding,
                           Gemm,
                           Norm,
                           Op,
                           Softmax,
                           Sparsity,
)

__all__ = [
    "ArchsimError", "ConfigError", "MappingError", "Problem", "SpecError", "WorkloadError",
    "FORMATS", "NumberFormat", "get_format", "PHASES", "Workload",
    "AllReduce", "Conv2d", "Elementwise", "Embedding", "Gemm", "Norm", "Op", "Softmax", "Sparsity",
]
