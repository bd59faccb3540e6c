"""Reference constants of the energy/area library, each with its source.

Every number the library turns into joules, mm² or watts lives here, in a
``Table`` (a set of values sharing one source, unit, node and voltage) or a
``Const`` (one value with its own source).  Nothing in this module computes;
the models in ``energy.arith`` / ``energy.classes`` and the node scaling in
``energy.scaling`` read these tables.

Confidence tags used in the ``source`` strings:

* **V** – the figure was checked against a retrieved copy of the source (see
  ``docs/energy.md`` "Verification").
* **C** – recalled from the (widely reproduced) source, not re-checked here;
  treat as accurate to the digits shown only.
* **A** – an assumption or a derivation of ours, explained in place.

Base point of all logic tables: 45 nm, 0.9 V (Horowitz, ISSCC 2014).

Verification of the Horowitz (ISSCC 2014) 45 nm table (``search`` tool, 2025):
the 32-bit rows (int add 0.1 pJ, int mult 3.1 pJ, fp add 0.9 pJ, fp mult
3.7 pJ) and the 8 KB SRAM 64-bit access (10 pJ) were found quoted verbatim,
"45 nm at 0.9 V from Horowitz", in Table 3 of PMC8934428 (Front. Neurol.).
The 8/16-bit rows, the 32 KB / 1 MB SRAM rows, the DRAM row and all area
figures could not be found in a retrievable copy: they stay tagged C.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "Const",
    "Table",
    "BASE_NODE_NM",
    "BASE_VDD_V",
    "INT_ADD_PJ",
    "INT_MULT_PJ",
    "FP_ADD_PJ",
    "FP_MULT_PJ",
    "SRAM_READ_64BIT_PJ",
    "DRAM_ACCESS_64BIT_PJ",
    "INT_ADD_UM2",
    "INT_MULT_UM2",
    "FP_ADD_UM2",
    "FP_MULT_UM2",
    "CELL_UM2",
    "SRAM_CELL_UM2",
    "SRAM_ARRAY_EFFICIENCY",
    "REGFILE_CELL_FACTOR",
    "REGFILE_ARRAY_EFFICIENCY",
    "LEAKAGE_W_PER_MM2",
    "INSTRUCTION_OVERHEAD_PJ",
    "SIMD_LANES",
    "VECTOR_RF_BANK_BYTES",
    "WIRE_CAP_PF_PER_MM",
    "WIRE_ACTIVITY",
    "LUT_MUX_ACTIVITY",
    "FLOAT_FORMATS",
    "INT_FORMATS",
    "BLOCK_FORMATS",
    "DRAM_TECHS",
    "DRAM_ACT_PJ_PER_ROW_BIT",
    "DRAM_ACT_REF_VDD_V",
    "PIM_MAC_FORMAT",
    "PIM_MAC_SOURCE",
    "FPGA_EVENT_SOURCE",
    "FPGA_DSP_PJ",
    "FPGA_LUT_PJ",
    "FPGA_FF_PJ",
    "FPGA_FF_CLOCK_PJ",
    "FPGA_BRAM_PJ",
    "FPGA_URAM_PJ",
    "STILLMAKER_SOURCE",
    "NOMINAL_VDD_SOURCE",
    "STILLMAKER_NODES_NM",
    "STILLMAKER_AREA_REL_45",
    "STILLMAKER_ENERGY_POLY",
    "STILLMAKER_DELAY_POLY",
    "STILLMAKER_POWER_POLY",
    "NOMINAL_VDD_V",
]

HOROWITZ_2014 = (
    "M. Horowitz, 'Computing's energy problem (and what we can do about it)', "
    "ISSCC 2014, energy/area table, 45 nm, 0.9 V"
)
STILLMAKER_2017 = (
    "A. Stillmaker, B. Baas, 'Scaling equations for the accurate prediction of CMOS "
    "device performance from 180 nm to 7 nm', Integration 58 (2017) 74-81 "
    "(+ corrigendum), HP-device fits"
)
NANGATE45 = "NanGate FreePDK45 Open Cell Library, X1 cell footprints"
OCP_MX = "OCP Microscaling Formats (MX) Specification v1.0, 2023"


@dataclass(frozen=True)
class Const:
    """One constant with its unit and source."""

    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class Table:
    """Values keyed by width (bits) or capacity (bytes), one shared source.

    Attributes:
        values: key -> value (read-only mapping).
        unit: unit of every value (e.g. ``"pJ"``, ``"um2"``).
        node_nm: technology node the values were measured/estimated at.
        vdd_v: supply voltage of the values (None: not voltage dependent).
        source: citation with confidence tag.
    """

    values: Mapping[int, float]
    unit: str
    node_nm: float
    vdd_v: float | None
    source: str


def _table(values: dict[int, float], unit: str, source: str) -> Table:
    return Table(MappingProxyType(dict(values)), unit, BASE_NODE_NM, BASE_VDD_V, source)


BASE_NODE_NM = 45.0
"""Node of every logic/SRAM table below (Horowitz 2014)."""
BASE_VDD_V = 0.9
"""Supply voltage of every logic/SRAM table below (Horowitz 2014)."""

# --------------------------------------------------------------------------------------
# Horowitz 2014, energy per operation (pJ) -- key: operand width in bits
# --------------------------------------------------------------------------------------
INT_ADD_PJ = _table({8: 0.03, 16: 0.05, 32: 0.1}, "pJ", HOROWITZ_2014 + "; 32b: V, 8b/16b: C")
INT_MULT_PJ = _table({8: 0.2, 32: 3.1}, "pJ", HOROWITZ_2014 + "; 32b: V, 8b: C")
FP_ADD_PJ = _table({16: 0.4, 32: 0.9}, "pJ", HOROWITZ_2014 + "; 32b: V, 16b: C")
FP_MULT_PJ = _table({16: 1.1, 32: 3.7}, "pJ", HOROWITZ_2014 + "; 32b: V, 16b: C")
# 64-bit read of an SRAM of the given capacity (bytes).
SRAM_READ_64BIT_PJ = _table(
    {8 * 1024: 10.0, 32 * 1024: 20.0, 1024 * 1024: 100.0},
    "pJ",
    HOROWITZ_2014 + "; 8 KB: V, 32 KB/1 MB: C",
)
# 64-bit DRAM access (DDR3-era), range low/high; documentation and sanity checks only.
DRAM_ACCESS_64BIT_PJ = (
    Const(1300.0, "pJ", HOROWITZ_2014 + "; C"),
    Const(2600.0, "pJ", HOROWITZ_2014 + "; C"),
)

# --------------------------------------------------------------------------------------
# Horowitz 2014, area per unit (um²) -- key: operand width in bits
# --------------------------------------------------------------------------------------
INT_ADD_UM2 = _table({8: 36.0, 16: 67.0, 32: 137.0}, "um2", HOROWITZ_2014 + "; C")
INT_MULT_UM2 = _table({8: 282.0, 32: 3495.0}, "um2", HOROWITZ_2014 + "; C")
FP_ADD_UM2 = _table({16: 1360.0, 32: 4184.0}, "um2", HOROWITZ_2014 + "; C")
FP_MULT_UM2 = _table({16: 1640.0, 32: 7700.0}, "um2", HOROWITZ_2014 + "; C")

# --------------------------------------------------------------------------------------
# Standard cells at 45 nm (um²).  Energy of a cell is derived in energy.arith as
# (8-bit adder energy / 8 full adders) x (cell area / full-adder area): switched
# capacitance is taken proportional to cell area (assumption A).
# --------------------------------------------------------------------------------------
CELL_UM2: Mapping[str, Const] = MappingProxyType(
    {
        "full_adder": Const(4.256, "um2", NANGATE45 + " FA_X1; C"),
        "mux2": Const(1.862, "um2", NANGATE45 + " MUX2_X1; C"),
        "xnor2": Const(1.596, "um2", NANGATE45 + " XNOR2_X1; C"),
        "dff": Const(4.522, "um2", NANGATE45 + " DFF_X1; C"),
    }
)

# --------------------------------------------------------------------------------------
# SRAM / register-file density at 45 nm
# --------------------------------------------------------------------------------------
SRAM_CELL_UM2 = Const(
    0.346,
    "um2/bit",
    "K. Mistry et al., 'A 45nm logic technology with high-k+metal gate transistors...', "
    "IEDM 2007: 0.346 um² 6T cell; C",
)
SRAM_ARRAY_EFFICIENCY = Const(
    0.6,
    "fraction",
    "A: cell area / macro area; CACTI-style macros of 16 KB-8 MB are typically 50-70% "
    "cell area (decoders, sense amps, drivers, routing are the rest); we use 0.6",
)
REGFILE_CELL_FACTOR = Const(
    2.0,
    "x 6T cell",
    "A: 1R1W register-file bit (8T, wider pitch for the second port) ~2x the 6T cell",
)
REGFILE_ARRAY_EFFICIENCY = Const(
    0.5, "fraction", "A: small multi-banked arrays have more periphery per bit than SRAM"
)

# --------------------------------------------------------------------------------------
# Leakage at 45 nm, 0.9 V (scaled to other nodes with scale(..., 'power', ...)).
# --------------------------------------------------------------------------------------
LEAKAGE_W_PER_MM2 = Const(
    0.02,
    "W/mm2",
    "A/C: order of magnitude of NanGate FreePDK45 typical-corner cell leakage "
    "(~10-20 nW per um² of cell area, e.g. DFF_X1 ~ 70 nW / 4.5 um²); applied to "
    "logic and SRAM area alike",
)

# --------------------------------------------------------------------------------------
# SIMD / CUDA-core vector ALU op
# --------------------------------------------------------------------------------------
INSTRUCTION_OVERHEAD_PJ = Const(
    70.0,
    "pJ/instruction",
    HOROWITZ_2014 + ": ~70 pJ fetch/decode/control overhead of one RISC instruction; C",
)
SIMD_LANES = Const(
    32.0,
    "lanes",
    "NVIDIA CUDA warp width (32 threads): one instruction is issued for 32 lanes",
)
VECTOR_RF_BANK_BYTES = Const(
    8 * 1024,
    "bytes",
    "A: operands come from an 8 KB register-file bank (GPU main register files are "
    "built from many small banks, cf. Gebhart et al., ISCA 2011); 3 reads + 1 write per op",
)

# --------------------------------------------------------------------------------------
# On-chip wires
# --------------------------------------------------------------------------------------
WIRE_CAP_PF_PER_MM = Const(
    0.2,
    "pF/mm",
    "C: ~0.2 fF/um for minimum-pitch intermediate/semi-global copper wires, nearly "
    "node independent (ITRS interconnect tables; Ho, Mai, Horowitz, Proc. IEEE 2001)",
)
WIRE_ACTIVITY = Const(0.5, "toggles/bit", "A: random data toggles half the bits per transfer")

# --------------------------------------------------------------------------------------
# LUT (mux-tree read of a register table)
# --------------------------------------------------------------------------------------
LUT_MUX_ACTIVITY = Const(
    0.5, "fraction", "A: fraction of the mux tree's (entries-1) muxes per bit that switch"
)

# --------------------------------------------------------------------------------------
# Number formats as the arithmetic models need them.  Storage bits must agree with
# workloads.formats; 'arith_bits' is the datapath width (tf32 is stored in 32 bits but
# computed on 19).
# --------------------------------------------------------------------------------------
FLOAT_FORMATS: Mapping[str, Mapping[str, int | str]] = MappingProxyType(
    {
        # name: storage bits, datapath bits, significand bits incl. the hidden bit
        "fp32": {"bits": 32, "arith_bits": 32, "significand_bits": 24, "source": "IEEE 754-2008 binary32"},
        "tf32": {"bits": 32, "arith_bits": 19, "significand_bits": 11, "source": "NVIDIA A100 whitepaper (2020): 8b exp, 10b mantissa"},
        "bf16": {"bits": 16, "arith_bits": 16, "significand_bits": 8, "source": "bfloat16: 8b exp, 7b mantissa (Google/Intel BF16 spec 2018)"},
        "fp16": {"bits": 16, "arith_bits": 16, "significand_bits": 11, "source": "IEEE 754-2008 binary16"},
        "fp8_e4m3": {"bits": 8, "arith_bits": 8, "significand_bits": 4, "source": "Micikevicius et al., 'FP8 formats for deep learning', 2022"},
        "fp8_e5m2": {"bits": 8, "arith_bits": 8, "significand_bits": 3, "source": "Micikevicius et al., 'FP8 formats for deep learning', 2022"},
        "fp6_e2m3": {"bits": 6, "arith_bits": 6, "significand_bits": 4, "source": OCP_MX + " (FP6 E2M3 element)"},
        "fp6_e3m2": {"bits": 6, "arith_bits": 6, "significand_bits": 3, "source": OCP_MX + " (FP6 E3M2 element)"},
        "fp4": {"bits": 4, "arith_bits": 4, "significand_bits": 2, "source": OCP_MX + " (FP4 E2M1 element)"},
    }
)
INT_FORMATS: Mapping[str, Mapping[str, int | str]] = MappingProxyType(
    {
        "int8": {"bits": 8, "kind": "int"},
        "int6": {"bits": 6, "kind": "int"},
        "int4": {"bits": 4, "kind": "int"},
        "int3": {"bits": 3, "kind": "int"},
        "int2": {"bits": 2, "kind": "int"},
        "int16": {"bits": 16, "kind": "int"},
        "int32": {"bits": 32, "kind": "int"},
        # ternary {-1,0,+1}: 2 storage bits; multiply = sign select, modelled as int2
        "ternary": {"bits": 2, "kind": "ternary"},
        # int1 / binary {-1,+1}: XNOR + popcount
        "int1": {"bits": 1, "kind": "binary"},
        "binary": {"bits": 1, "kind": "binary"},
    }
)
BLOCK_FORMATS: Mapping[str, Mapping[str, int | str]] = MappingProxyType(
    {
        # storage bits per element (scale amortised separately), element format,
        # block size, shared-scale bits (E8M0)
        "mxfp4": {"bits": 4, "element": "fp4", "block_size": 32, "scale_bits": 8, "source": OCP_MX},
        # NVFP4: E2M1 elements, one FP8 E4M3 scale per 16 (NVIDIA Blackwell technical brief, 2024)
        "nvfp4": {"bits": 4, "element": "fp4", "block_size": 16, "scale_bits": 8,
                  "source": "NVIDIA Blackwell architecture technical brief (2024): NVFP4"},
        "mxint8": {"bits": 8, "element": "int8", "block_size": 32, "scale_bits": 8, "source": OCP_MX},
    }
)

# --------------------------------------------------------------------------------------
# DRAM: energy per bit moved (core + on-die movement + I/O, at the source's typical
# access pattern, i.e. incl. an average share of row activations).  Not node scaled.
# row_bytes: page per bank of one device/pseudo-channel; core_vdd_v: array supply.
# --------------------------------------------------------------------------------------
DRAM_TECHS: Mapping[str, Mapping[str, float | str]] = MappingProxyType(
    {
        "ddr4": {"pj_per_bit": 15.0, "row_bytes": 1024, "core_vdd_v": 1.2,
                 "source": "C: DDR4 DIMM incl. I/O 15-20 pJ/bit (e.g. Micron TN-40-07 power "
                           "calculator; Li, Reddy, Jacob, MEMSYS 2018); low end used"},
        "lpddr4": {"pj_per_bit": 5.0, "row_bytes": 2048, "core_vdd_v": 1.1,
                   "source": "C/A: LPDDR4 (LVSTL I/O) ~4-6 pJ/bit (Li, Reddy, Jacob, MEMSYS 2018 "
                             "report LPDDR4 among the most efficient planar DRAMs)"},
        "lpddr5": {"pj_per_bit": 4.0, "row_bytes": 2048, "core_vdd_v": 1.05,
                   "source": "A: LPDDR4 figure less ~20% (vendor claims for LPDDR5 vs LPDDR4)"},
        "gddr6": {"pj_per_bit": 7.5, "row_bytes": 2048, "core_vdd_v": 1.35,
                  "source": "V: Micron 'Ultra-bandwidth solutions' table, GDDR6 average device "
                            "power 7.5 pJ/bit"},
        "hbm2": {"pj_per_bit": 3.9, "row_bytes": 1024, "core_vdd_v": 1.2,
                 "source": "C: O'Connor et al., 'Fine-grained DRAM', MICRO 2017: HBM2 ~3.9 pJ/bit"},
        "hbm2e": {"pj_per_bit": 3.9, "row_bytes": 1024, "core_vdd_v": 1.2,
                  "source": "A: same architecture/I-O as HBM2 (O'Connor 2017 figure); Micron "
                            "quotes 6.0 pJ/bit device power for HBM2E (V), an upper bound"},
        "hbm3": {"pj_per_bit": 3.4, "row_bytes": 1024, "core_vdd_v": 1.1,
                 "source": "A: HBM2 figure less ~13% (VDDQ 1.2 V -> 0.4 V I/O, vendor claims)"},
        "hbm3e": {"pj_per_bit": 3.2, "row_bytes": 1024, "core_vdd_v": 1.1,
                  "source": "A: HBM3 figure less ~6% (vendor claims ~10% better power efficiency)"},
    }
)
DRAM_ACT_PJ_PER_ROW_BIT = Const(
    0.093,
    "pJ per bit of the opened row",
    "A: (IDD0 - IDD3N) x VDD x tRC for a DDR4-2400 8Gb x8 device (~14 mA x 1.2 V x 45 ns "
    "= 0.76 nJ per 1 KB row), per row bit; scaled by (core VDD / 1.2 V)^2",
)
DRAM_ACT_REF_VDD_V = 1.2
PIM_MAC_FORMAT = "bf16"
PIM_MAC_SOURCE = (
    "A: an in-bank PIM MAC is a bf16 MAC (GDDR6-AiM, Lee et al. ISSCC 2022, and HBM-PIM, "
    "Kwon et al. ISSCC 2021, use bf16/fp16 MAC units) at the 45 nm logic figure, times "
    "(DRAM core VDD / 0.9 V)^2 for the higher-voltage DRAM process"
)

# --------------------------------------------------------------------------------------
# FPGA fabric: dynamic energy per event of one resource, Xilinx UltraScale+ (16 nm
# FinFET, 0.85 V VCCINT). Used by the nm_sparse_fpga family (arch/fpga/unit.py), which
# turns the resources an action exercises into pJ per action (LUT/FF figures times the
# design's toggle ``activity``). Not node scaled: the fabric is fixed. They set energy
# only, never latency; replace them with XPE or board measurements for a real build.
# --------------------------------------------------------------------------------------
FPGA_EVENT_SOURCE = (
    "C: order of magnitude (not checked) of the per-resource dynamic figures the Xilinx "
    "Power Estimator (XPE, UG440) uses for 16 nm UltraScale+, expressed per event"
)
FPGA_DSP_PJ = Const(2.0, "pJ per DSP48E2 multiply(-add) with typical data",
                    FPGA_EVENT_SOURCE)
FPGA_LUT_PJ = Const(0.12, "pJ per LUT output toggle incl. its local routing",
                    FPGA_EVENT_SOURCE)
FPGA_FF_PJ = Const(0.05, "pJ per flip-flop data toggle", FPGA_EVENT_SOURCE)
FPGA_FF_CLOCK_PJ = Const(0.01, "pJ per flip-flop per cycle (clock-tree load; the clock "
                         "toggles every cycle)", FPGA_EVENT_SOURCE)
FPGA_BRAM_PJ = Const(8.0, "pJ per 72-bit BRAM36 port access", FPGA_EVENT_SOURCE)
FPGA_URAM_PJ = Const(15.0, "pJ per 72-bit URAM port access (larger array, longer lines)",
                     FPGA_EVENT_SOURCE)

# --------------------------------------------------------------------------------------
# Stillmaker & Baas 2017: per-node fits (HP devices for 45 nm and below)
# --------------------------------------------------------------------------------------
STILLMAKER_NODES_NM: tuple[float, ...] = (180, 130, 90, 65, 45, 32, 20, 16, 14, 10, 7)
# Area of a design at the node relative to 45 nm (the paper's area-scaling table, 45 nm row).
STILLMAKER_AREA_REL_45: Mapping[float, float] = MappingProxyType(
    {180: 19.0, 130: 6.4, 90: 2.8, 65: 1.5, 45: 1.0, 32: 0.46, 20: 0.21, 16: 0.19, 14: 0.17, 10: 0.1, 7: 0.059}
)
# Energy factor(V) = a V² + b V + c
STILLMAKER_ENERGY_POLY: Mapping[float, tuple[float, float, float]] = MappingProxyType(
    {
        180: (0.0, 24.64, -17.98),
        130: (7.171, -6.709, 2.904),
        90: (4.762, -4.781, 2.092),
        65: (3.755, -4.398, 1.975),
        45: (1.018, -0.3107, 0.1539),
        32: (0.8367, -0.4341, 0.1701),
        20: (0.373, -0.1582, 0.04104),
        16: (0.2958, -0.1241, 0.03024),
        14: (0.2363, -0.09675, 0.02239),
        10: (0.2068, -0.09311, 0.02375),
        7: (0.1776, -0.09097, 0.02447),
    }
)
# Delay factor(V) = a V³ + b V² + c V + d
STILLMAKER_DELAY_POLY: Mapping[float, tuple[float, float, float, float]] = MappingProxyType(
    {
        180: (0.0, 97.09, -356.7, 406.5),
        130: (-76.65, 334.9, -493.4, 275.8),
        90: (-60.34, 262.5, -384.2, 210.9),
        65: (-53.3, 230.4, -333.9, 178.6),
        45: (-501.6, 1567.0, -1619.0, 566.1),
        32: (-1047.0, 2982.0, -2797.0, 873.5),
        20: (0.0, 34.63, -66.37, 41.15),
        16: (0.0, 24.8, -47.52, 28.87),
        14: (-40.66, 109.2, -100.6, 35.92),
        10: (-34.95, 93.65, -85.99, 30.4),
        7: (-28.58, 76.6, -70.26, 24.69),
    }
)
# Power factor(V) = a V² + b V + c (used for leakage power)
STILLMAKER_POWER_POLY: Mapping[float, tuple[float, float, float]] = MappingProxyType(
    {
        180: (0.0, 101000.0, -79720.0),
        130: (27020.0, -15450.0, 5630.0),
        90: (17320.0, -11230.0, 4328.0),
        65: (12890.0, -10510.0, 4362.0),
        45: (5462.0, -1760.0, 522.4),
        32: (4001.0, -1733.0, 533.6),
        20: (2922.0, -1286.0, 299.9),
        16: (2133.0, -882.6, 197.7),
        14: (1675.0, -711.0, 159.0),
        10: (1456.0, -621.6, 143.8),
        7: (1179.0, -515.7, 123.4),
    }
)
STILLMAKER_SOURCE = (
    STILLMAKER_2017
    + "; coefficients V: cross-checked against the corrigendum's worked example "
    "(32 nm: 0.8367, -0.4341, 0.1701; 65 nm: 3.755, -4.398, 1.975) and a public "
    "transcription of the tables (github.com/wromaszkan/nodeScale)"
)
# Nominal supply per node (V).  45 nm uses Horowitz's 0.9 V so that the default
# Technology() reproduces the base tables exactly (Stillmaker's PTM 45 nm is 1.0 V).
NOMINAL_VDD_V: Mapping[float, float] = MappingProxyType(
    {180: 1.8, 130: 1.3, 90: 1.2, 65: 1.1, 45: 0.9, 32: 0.9, 20: 0.9, 16: 0.85, 14: 0.8, 10: 0.75, 7: 0.7}
)
NOMINAL_VDD_SOURCE = (
    "C: PTM/ITRS nominal supplies used by Stillmaker & Baas (180-7 nm); 45 nm: 0.9 V "
    "(Horowitz 2014 operating point); below 7 nm: 0.7 V held (voltage scaling has stalled; A)"
)
