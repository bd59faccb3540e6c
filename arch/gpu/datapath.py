"""Datapath widths and per-MAC register traffic of a tensor-core GPU SM: the granularity
at which the energy and power model counts actions. One home for the unit's estimates
(``arch.gpu.unit``) and its attention kernels (``arch.gpu.kernels``).
"""

from __future__ import annotations

__all__ = ["SFU_PER_ELEMENT", "SMEM_WIDTH_BITS", "L2_SECTOR_BITS", "L2_SLICE_BYTES",
           "RF_WIDTH_BITS", "RF_READ_B_PER_MAC", "RF_WRITE_B_PER_MAC", "RF_AB_B_PER_MAC"]

#: Special-function (exp / tanh) evaluations per element on the SFUs.
SFU_PER_ELEMENT = {"softmax": 1, "gelu": 1, "silu": 1, "swiglu": 1}
SMEM_WIDTH_BITS = 1024      # 32 banks x 4 B per clock
L2_SECTOR_BITS = 256        # 32-byte sectors
L2_SLICE_BYTES = 512 * 1024  # energy model granularity (one L2 slice)
RF_WIDTH_BITS = 1024        # one warp-wide 32-bit register access
# register-file traffic of an MMA per MAC: m16n8k16 (2048 MACs) reads A 512 B, B 256 B,
# C 512 B and writes C 512 B.
RF_READ_B_PER_MAC = 1280 / 2048
RF_WRITE_B_PER_MAC = 512 / 2048
RF_AB_B_PER_MAC = 768 / 2048     # the A + B part of the reads
