"""Workloads: ops, number formats, sparsity, network graphs, model zoo, importers.

The lowest layer of archsim; it also holds the error family (``workloads.errors``) and
the strict YAML loader (``workloads.yamlio``) that every layer above uses.
"""

from workloads.errors import (
                           ArchsimError,
                           ConfigError,
                           MappingError,
                           Problem,
                           SpecError,
                           WorkloadError,
)
from workloads.formats import FORMATS, NumberFormat, get_format
from workloads.graph import PHASES, Workload
from workloads.ops import (
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
