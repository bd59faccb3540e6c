"""LUT tensor-core family (``kind: lut_tensor_core``): an A100-class GPU whose low-bit
mixed-precision GEMMs run on lookup-table tensor cores (Mo et al., ISCA 2025).

Modules: ``unit`` (spec, LUT mainloop, the registered :class:`LutTensorCoreGpu`, design-rule
helpers), ``reference`` (golden workloads and validation checks of the family).
"""

from archsim.arch.lut.unit import (
    LUT_DATAFLOWS,
    LutCoreSpec,
    LutGpuSpec,
    LutTensorCoreGpu,
    lut_weight_bits,
    mac_dp_area_per_sm_mm2,
    table_entries,
    table_storage_bits,
    weight_bit_sweep,
    weight_storage_bits,
)

__all__ = ["LutCoreSpec", "LutGpuSpec", "LutTensorCoreGpu", "LUT_DATAFLOWS", "table_entries",
           "table_storage_bits", "weight_storage_bits", "mac_dp_area_per_sm_mm2",
           "lut_weight_bits", "weight_bit_sweep"]

import archsim.arch.lut.reference  # noqa: E402,F401  (registers golden workloads and checks)
