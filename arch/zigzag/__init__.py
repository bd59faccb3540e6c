"""ZigZag inputs (accelerator YAML, mapping YAML), read in pure Python.

See :mod:`arch.zigzag.reader` and ``docs/zigzag.md``.
"""

from archsim.arch.zigzag.reader import (
    ARRAY_LEVEL,
    DEFAULT_PRECISION,
    LAYER_DIMS,
    LAYER_OPERANDS,
    ZigzagAccelerator,
    ZigzagMappingEntry,
    ZigzagMemory,
    hierarchy,
    read_accelerator,
    read_mapping,
)

__all__ = ["ARRAY_LEVEL", "DEFAULT_PRECISION", "LAYER_DIMS", "LAYER_OPERANDS", "ZigzagAccelerator",
           "ZigzagMappingEntry", "ZigzagMemory", "hierarchy", "read_accelerator",
           "read_mapping"]
