"""Number formats: one type for every element format an op may use.

A :class:`NumberFormat` gives the storage bits per element and, for block (microscaling)
formats, the shared-scale bits per block, so that ``bits_per_element`` is the true storage
cost. Names are the ones accepted on the command line (``--a-format fp16``); int16/int32
are included for fixed-point datapaths (Eyeriss) and accumulators.

Sources: OCP Microscaling Formats (MX) v1.0 (2023) for mxfp4/mxint8 (block of 32 elements,
one 8-bit E8M0 scale) and the FP6 (E2M3, E3M2) and FP4 (E2M1) element formats; NVIDIA
Blackwell architecture technical brief (2024) for NVFP4 (E2M1 elements, one FP8 E4M3 scale
per 16 elements); NVIDIA Hopper FP8 (E4M3/E5M2); BitNet b1.58 (ternary weights,
log2(3) = 1.58 bits of information, stored in 2 bits).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archsim.workloads.errors import Problem, WorkloadError

__all__ = ["NumberFormat", "FORMATS", "get_format", "format_names"]


@dataclass(frozen=True)
class NumberFormat:
    """An element number format.

    Attributes:
        name: CLI name, e.g. ``"bf16"``.
        kind: ``"float"``, ``"int"``, ``"ternary"``, ``"binary"`` or ``"block"``.
        bits: storage bits per element (excluding any shared block scale).
        exponent_bits: for floats (and the element type of block floats), else 0.
        mantissa_bits: explicit mantissa bits for floats; value bits - 1 for signed ints.
        block_size: elements sharing one scale (block formats), else 1.
        scale_bits: bits of the shared scale per block (block formats), else 0.
        element_kind: for block formats, ``"float"`` or ``"int"`` element type.
    """

    name: str
    kind: str
    bits: int
    exponent_bits: int = 0
    mantissa_bits: int = 0
    block_size: int = 1
    scale_bits: int = 0
    element_kind: str = ""

    @property
    def bits_per_element(self) -> float:
        """Storage bits per element including the amortised block scale."""
        return self.bits + (self.scale_bits / self.block_size if self.block_size > 1 else 0.0)

    @property
    def bytes_per_element(self) -> float:
        """Storage bytes per element including the amortised block scale."""
        return self.bits_per_element / 8.0

    @property
    def info_bits(self) -> float:
        """Information content per element in bits (ternary: log2 3 = 1.585)."""
        return math.log2(3) if self.kind == "ternary" else float(self.bits)

    @property
    def is_float(self) -> bool:
        return self.kind == "float" or (self.kind == "block" and self.element_kind == "float")

    @property
    def is_integer(self) -> bool:
        """Integer-like (int, ternary, binary, or block of ints)."""
        return not self.is_float

    @property
    def multiplier_bits(self) -> int:
        """Width of the significand the multiplier sees (mantissa + hidden bit for floats)."""
        if self.is_float:
            return self.mantissa_bits + 1
        return self.bits

    def __str__(self) -> str:
        return self.name


def _f(name: str, bits: int, e: int, m: int) -> NumberFormat:
    return NumberFormat(name, "float", bits, exponent_bits=e, mantissa_bits=m)


def _i(name: str, bits: int) -> NumberFormat:
    return NumberFormat(name, "int", bits, mantissa_bits=bits - 1)


FORMATS: dict[str, NumberFormat] = {
    f.name: f
    for f in (
        _f("fp32", 32, 8, 23),
        # TF32 is stored as fp32 in memory; the tensor core reads 19 bits (8e + 10m + sign).
        NumberFormat("tf32", "float", 32, exponent_bits=8, mantissa_bits=10),
        _f("bf16", 16, 8, 7),
        _f("fp16", 16, 5, 10),
        _f("fp8_e4m3", 8, 4, 3),
        _f("fp8_e5m2", 8, 5, 2),
        _f("fp6_e2m3", 6, 2, 3),
        _f("fp6_e3m2", 6, 3, 2),
        # FP4 E2M1 as a plain element (per-tensor scale); with block scales: nvfp4 / mxfp4
        _f("fp4", 4, 2, 1),
        _i("int32", 32),
        _i("int16", 16),
        _i("int8", 8),
        _i("int7", 7),
        _i("int6", 6),
        _i("int5", 5),
        _i("int4", 4),
        _i("int3", 3),
        _i("int2", 2),
        NumberFormat("ternary", "ternary", 2, mantissa_bits=1),
        NumberFormat("int1", "binary", 1),
        NumberFormat("mxfp4", "block", 4, exponent_bits=2, mantissa_bits=1, block_size=32,
                     scale_bits=8, element_kind="float"),
        NumberFormat("nvfp4", "block", 4, exponent_bits=2, mantissa_bits=1, block_size=16,
                     scale_bits=8, element_kind="float"),
        NumberFormat("mxint8", "block", 8, mantissa_bits=7, block_size=32, scale_bits=8,
                     element_kind="int"),
    )
}


def format_names() -> list[str]:
    """All format names, in the order above."""
    return list(FORMATS)


def get_format(name: str | NumberFormat, where: str = "format") -> NumberFormat:
    """Look a format up by name (a NumberFormat is returned unchanged).

    Raises:
        WorkloadError: unknown name; the message lists the known names.
    """
    if isinstance(name, NumberFormat):
        return name
    fmt = FORMATS.get(str(name).lower())
    if fmt is None:
        raise WorkloadError(Problem(
            f"unknown number format {name!r}; expected one of: {', '.join(FORMATS)}", where))
    return fmt
