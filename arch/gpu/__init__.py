"""Tensor-core GPU family (``kind: tensor_core_gpu``): A100 / H100 / H200 / T4 class GPUs.

Modules: ``spec`` (the YAML schema), ``precision`` (which MMA datapath runs a format pair),
``gemm`` (the CTA-tile GEMM model), ``unit`` (the registered :class:`TensorCoreGpu`),
``lower`` (CTA-tile lowering to ``sim.TaskGraph``), ``kernels`` (SDPA attention, vector
ops, the quantisation kernel), ``paged_attention`` (FlashAttention as a serving framework
calls it: FA2 / FA3 / FA4 through a paged KV cache). Equations: ``docs/gpu.md``.
"""

from archsim.arch.gpu.spec import GpuSpec
from archsim.arch.gpu.unit import DATAFLOWS, TensorCoreGpu

__all__ = ["GpuSpec", "TensorCoreGpu", "DATAFLOWS"]

import archsim.arch.gpu.reference  # noqa: E402,F401  (registers golden workloads and checks)
