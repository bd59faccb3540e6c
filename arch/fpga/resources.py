"""FPGA resource model: DSP48E2, LUT6, FF, BRAM36 and URAM per component of a design.

Every formula here is a pure function of the design parameters, so that each can be
checked by hand (``tests/fpga/test_resources.py``). The constants are Xilinx UltraScale+
figures; their source and confidence tag (A primary, B secondary, C recalled/unchecked,
D derived by the arithmetic shown) sit next to each one. Equations: ``docs/fpga.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

__all__ = ["Resources", "RESOURCE_NAMES", "MULT_COST", "ADD_COST", "VECTOR_MULT",
           "VECTOR_ADD", "mac_cost",
           "mux_luts_per_bit", "bram36_blocks", "uram_blocks", "comparator_luts",
           "topn_selector", "BRAM36_SHAPES_SDP", "BRAM36_SHAPES_TDP", "URAM_DEPTH",
           "URAM_WIDTH", "DDR4_CONTROLLER", "SHELL", "index_bits", "exceeded"]

RESOURCE_NAMES = ("dsp", "lut", "ff", "bram36", "uram")


@dataclass(frozen=True)
class Resources:
    """An amount of each FPGA resource (fractions allowed: two int8 MACs share one DSP)."""

    dsp: float = 0.0
    lut: float = 0.0
    ff: float = 0.0
    bram36: float = 0.0
    uram: float = 0.0

    def __add__(self, other: Resources) -> Resources:
        return Resources(*(getattr(self, n) + getattr(other, n) for n in RESOURCE_NAMES))

    def __mul__(self, k: float) -> Resources:
        return Resources(*(getattr(self, n) * k for n in RESOURCE_NAMES))

    __rmul__ = __mul__

    def as_dict(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}

    def rounded(self) -> Resources:
        """Whole blocks/cells (a fraction of a DSP or LUT still occupies one)."""
        return Resources(*(math.ceil(getattr(self, n) - 1e-9) for n in RESOURCE_NAMES))

    @staticmethod
    def total(parts: Iterable[Resources]) -> Resources:
        out = Resources()
        for p in parts:
            out = out + p
        return out


# ---- arithmetic ------------------------------------------------------------------------
#: One multiplier per MAC format: (DSP48E2, LUT, FF).
#: fp16 / bf16: the significand product (11x11 or 8x8 bits) fits one 27x18 DSP48E2
#: multiplier; exponent add, normalisation and rounding in fabric. Tag C: Xilinx PG060
#: (Floating-Point Operator v7.1) UltraScale+ resource table, half-precision multiply with
#: "full" DSP usage, recalled as 1 DSP + ~70 LUT + ~110 FF; bf16 by the same structure with
#: a narrower significand (D: fewer normalisation bits).
#: int8: two int8 x int8 products sharing one operand packed into one 27x18 multiplier
#: (Xilinx WP486, "Deep Learning with INT8 Optimization on Xilinx Devices", tag C), so half
#: a DSP per MAC, plus a few LUTs for the sign correction of the packed products.
MULT_COST: Mapping[str, Resources] = {
    "fp16": Resources(dsp=1.0, lut=70.0, ff=110.0),
    "bf16": Resources(dsp=1.0, lut=60.0, ff=100.0),
    "int8": Resources(dsp=0.5, lut=10.0, ff=20.0),
}

#: One accumulator adder per MAC (PE adder tree + accumulator), by accumulator format and
#: implementation. fp32 add: PG060 single-precision add (tag C, recalled): "full" DSP usage
#: 2 DSP + ~180 LUT + ~300 FF; logic only ~400 LUT + ~550 FF.
#: int32 (int8 MACs): in a DSP the 48-bit post-adder accumulates the packed products for
#: free (WP486, C); in logic a 32-bit ripple adder takes 1 LUT per bit on the CARRY8 chain
#: plus a 32-bit register (D, UG574 CLB: one LUT6 + one carry bit per sum bit).
ADD_COST: Mapping[tuple[str, str], Resources] = {
    ("fp32", "dsp"): Resources(dsp=2.0, lut=180.0, ff=300.0),
    ("fp32", "logic"): Resources(dsp=0.0, lut=400.0, ff=550.0),
    ("int32", "dsp"): Resources(dsp=0.0, lut=0.0, ff=0.0),
    ("int32", "logic"): Resources(dsp=0.0, lut=32.0, ff=32.0),
}

#: One fp32 vector lane (softmax, norms, element-wise): a multiplier (PG060 single-precision
#: multiply, "full" DSP usage, recalled as 3 DSP + ~80 LUT + ~150 FF, tag C) and an fp32
#: adder in DSPs (``ADD_COST``).
VECTOR_MULT = Resources(dsp=3.0, lut=80.0, ff=150.0)
VECTOR_ADD = ADD_COST[("fp32", "dsp")]


def mac_cost(fmt: str, adder: str) -> Resources:
    """Resources of one MAC lane: a multiplier in ``fmt`` plus its accumulator adder
    (fp32 for float formats, int32 for int8), implemented in DSPs or in logic."""
    acc = "int32" if fmt == "int8" else "fp32"
    return MULT_COST[fmt] + ADD_COST[(acc, adder)]


# ---- N:M selection -----------------------------------------------------------------------
def index_bits(m: int) -> int:
    """Bits of one N:M position index: ceil(log2 M) (0 for M = 1)."""
    return math.ceil(math.log2(m)) if m > 1 else 0


def mux_luts_per_bit(m: int) -> float:
    """LUT6s of one bit of an M:1 multiplexer on an UltraScale+ CLB.

    A LUT6 is a 4:1 mux (4 data + 2 select inputs); the dedicated F7MUX/F8MUX combine two
    or four LUTs into an 8:1 or 16:1 mux without further LUTs (UG574, CLB user guide, tag
    C). So M:1 costs M/4 LUTs for M in {4, 8, 16}; a 2:1 mux of two bits with one shared
    select needs 5 inputs and fits one dual-output LUT6_2 (0.5 LUT per bit). Beyond 16:1,
    16:1 muxes are combined by another mux level of the same rule (D).
    """
    if m < 1:
        raise ValueError(f"mux needs M >= 1, got {m}")
    if m == 1:
        return 0.0
    if m == 2:
        return 0.5
    if m <= 16:
        return math.ceil(m / 4)
    first = math.ceil(m / 16)
    return first * 4 + mux_luts_per_bit(first)


def comparator_luts(bits: int) -> float:
    """A ``bits``-wide magnitude comparator: one LUT per bit on the carry chain (D, UG574:
    a LUT6 + CARRY8 bit computes one bit of a - b)."""
    return float(bits)


def topn_selector(n: int, m: int, bits: int) -> Resources:
    """One N-of-M top-magnitude selector lane of the sparse-weight generator.

    ``n`` passes of an (M-1)-comparator max tree over |w| (the magnitudes of the group),
    each comparator ``bits`` LUTs, each stage registered (FF = LUT); the chosen values and
    their indices are registered too: n * (bits + index_bits(m)) FF (D).
    """
    comps = n * (m - 1)
    lut = comps * comparator_luts(bits)
    return Resources(lut=lut, ff=lut + n * (bits + index_bits(m)))


# ---- block memories ----------------------------------------------------------------------
#: BRAM36 aspect ratios (depth, width) in simple dual-port mode (one read + one write
#: port; up to 72 bits) and true dual-port mode (two read/write ports; up to 36 bits).
#: Tag C: Xilinx UG573 (UltraScale Memory Resources), 36 Kb block RAM.
BRAM36_SHAPES_SDP = ((512, 72), (1024, 36), (2048, 18), (4096, 9), (8192, 4), (16384, 2),
                     (32768, 1))
BRAM36_SHAPES_TDP = BRAM36_SHAPES_SDP[1:]
#: UltraRAM: 288 Kb, 4096 x 72, two ports, fixed aspect ratio (UG573, tag C).
URAM_DEPTH = 4096
URAM_WIDTH = 72


def _depth(capacity_bits: float, width_bits: int) -> int:
    return max(1, math.ceil(capacity_bits / width_bits))


def bram36_blocks(capacity_bits: float, width_bits: int, ports: int = 1) -> int:
    """BRAM36 blocks for a buffer of ``capacity_bits`` read ``width_bits`` at a time.

    Depth D = ceil(capacity / width); for each aspect ratio (d, w) of the port mode the
    buffer needs ceil(width / w) x ceil(D / d) blocks; the best shape is taken. ``ports``
    1: simple dual port (1R + 1W), 2: true dual port (2 R/W ports, widths <= 36).
    """
    if ports not in (1, 2):
        raise ValueError(f"BRAM36 has 1 (SDP) or 2 (TDP) port modes, got {ports}")
    shapes = BRAM36_SHAPES_SDP if ports == 1 else BRAM36_SHAPES_TDP
    d = _depth(capacity_bits, width_bits)
    return min(math.ceil(width_bits / w) * math.ceil(d / dd) for dd, w in shapes)


def uram_blocks(capacity_bits: float, width_bits: int) -> int:
    """URAM blocks: ceil(width / 72) x ceil(depth / 4096) (fixed 4K x 72 shape, 2 ports)."""
    d = _depth(capacity_bits, width_bits)
    return math.ceil(width_bits / URAM_WIDTH) * math.ceil(d / URAM_DEPTH)


# ---- infrastructure ----------------------------------------------------------------------
#: One DDR4 memory controller + PHY (MIG, 64-bit data channel). Tag C: order of magnitude
#: recalled from Xilinx MIG/DDR4 IP utilisation reports (~9k LUT, ~11k FF, ~25 BRAM36 per
#: channel); verify with the IP's resource report before relying on it.
DDR4_CONTROLLER = Resources(lut=9000.0, ff=11000.0, bram36=25.0)
#: Host shell: PCIe DMA (XDMA), AXI interconnect, clocking and the accelerator's control
#: and scheduler (instruction memory, address generators). Tag C: VCU1525/SDAccel-class
#: shells occupy roughly 5 % of a VU9P's LUTs; taken as 60k LUT, 80k FF, 60 BRAM36.
SHELL = Resources(lut=60000.0, ff=80000.0, bram36=60.0)


def exceeded(used: Resources, available: Resources, max_utilization: float = 1.0
             ) -> list[str]:
    """Messages for every resource over ``max_utilization`` x the part's amount, e.g.
    ``"dsp: 7200 needed > 6840 available"``."""
    out = []
    for n in RESOURCE_NAMES:
        need, have = getattr(used, n), getattr(available, n) * max_utilization
        if need > have + 1e-9:
            cap = "available" if max_utilization >= 1.0 else f"usable at {max_utilization:.0%}"
            out.append(f"{n}: {need:.0f} needed > {have:.0f} {cap}")
    return out
