"""Configuration of the DRAM processing-in-memory family (``kind: dram_pim``).

A :class:`DramPimSpec` names a ``sim.dram`` preset plus overrides (channels, tCK, timing,
refresh), the bank-level processing units (MAC lanes, format, clock relative to the DRAM
command clock, banks sharing one unit), the per-channel global buffer and the ASIC that runs
the non-matrix work (:class:`AsicSpec`). Everything derived (peak FLOP/s, MAC-command
interval, internal bandwidth) is computed by :mod:`arch.pim.unit` from these fields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from archsim.arch.spec import param
from archsim.sim.dram_presets import PRESETS
from archsim.sim.errors import DramConfigError
from archsim.workloads.formats import FORMATS, NumberFormat

__all__ = ["AsicSpec", "DramPimSpec", "DRAM_ENERGY_TECH"]

#: ``energy`` DRAM technology used for each ``sim.dram`` preset (energy per byte moved over
#: the I/O, activation energy per row): the preset's ``tech`` (one home, ``sim.dram_presets``).
DRAM_ENERGY_TECH: dict[str, str] = {name: str(p["tech"]) for name, p in PRESETS.items()}


@dataclass(frozen=True, kw_only=True)
class AsicSpec:
    """The ASIC (or host logic die) next to the PIM channels: softmax, layer norm, GELU,
    residual adds, partial-sum reduction, command issue."""

    clock_mhz: float = param(doc="ASIC clock", unit="MHz", min=0, min_exclusive=True)
    vector_lanes: int = param(doc="vector ALU lanes (one element op per lane per cycle)", min=1)
    sram_kib: float = param(doc="on-chip SRAM for activations, scores and partial sums",
                            unit="KiB", min=0, min_exclusive=True)
    sram_width_bits: int = param(256, doc="SRAM access width (energy per access)", unit="bits",
                                 min=8)
    format: NumberFormat = param(FORMATS["bf16"], doc="vector ALU format")


@dataclass(frozen=True, kw_only=True)
class DramPimSpec:
    """A DRAM device with processing units in its banks, and the ASIC that drives it."""

    dram_preset: str = param(doc="sim.dram preset the device is built on",
                             choices=tuple(sorted(PRESETS)))
    channels: int = param(doc="PIM channels (pseudo-channels for HBM)", min=1, max=1024)
    tck_ps: float = param(0.0, doc="DRAM command clock period (0 = the preset's)", unit="ps",
                          min=0)
    timing: dict[str, int] = param(default_factory=lambda: MappingProxyType({}),
                                   doc="timing overrides in tCK (JEDEC names, e.g. nRCDRD)")
    refresh: bool = param(True, doc="all-bank refresh every nREFI, taking nRFC")
    banks_per_unit: int = param(1, doc="banks sharing one processing unit (HBM-PIM: 2)",
                                min=1)
    mac_lanes: int = param(doc="multipliers per processing unit (elements per MAC command)",
                           min=1)
    mac_format: NumberFormat = param(FORMATS["bf16"], doc="processing-unit number format")
    mac_clock_ratio: float = param(1.0, doc="processing-unit clock / DRAM command clock; one "
                                   "MAC command per ceil(1/ratio) tCK", min=0, max=1,
                                   min_exclusive=True)
    global_buffer_bytes: int = param(2048, doc="global buffer per channel (input vector)",
                                     unit="bytes", min=2)
    internal_read_pj_per_bit: float = param(doc="energy of an in-bank column read (cells to "
                                            "the bank's processing unit, no I/O)",
                                            unit="pJ/bit", min=0)
    background_power_w_per_channel: float = param(0.0, doc="DRAM background + refresh power",
                                                  unit="W", min=0)
    pim_logic_node_nm: float = param(65.0, doc="logic-equivalent node of the in-DRAM "
                                     "processing units (area/leakage)", unit="nm", min=3,
                                     max=180)
    host_link_gbps: float = param(0.0, doc="host <-> ASIC link for token input/output "
                                  "(0 = not modelled)", unit="GB/s", min=0)
    asic: AsicSpec = param(doc="the ASIC next to the PIM channels")
    source: str = param("", doc="where the numbers come from")

    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def check(self) -> list[tuple[str, str]]:

        out: list[tuple[str, str]] = []
        try:
            d = self.dram_spec()
        except DramConfigError as exc:
            return [("timing" if self.timing else "dram_preset", str(exc))]
        banks = d.bankgroups * d.banks
        if banks % self.banks_per_unit:
            out.append(("banks_per_unit", f"{banks} banks per channel are not a multiple of "
                        f"banks_per_unit {self.banks_per_unit}"))
        col_bytes = self.mac_lanes * self.mac_format.bits / 8
        if col_bytes > d.bursts_per_row * d.burst_bytes:
            out.append(("mac_lanes", f"one MAC command reads {col_bytes:g} bytes per bank, more "
                        f"than a row ({d.bursts_per_row * d.burst_bytes} bytes)"))
        if self.global_buffer_bytes < col_bytes:
            out.append(("global_buffer_bytes", f"must hold at least one MAC operand "
                        f"({col_bytes:g} bytes)"))
        return out

    # ---- derived (pure functions of the fields) ------------------------------------------
    def dram_spec(self) -> Any:
        """The ``sim.dram.DramSpec`` of the device (preset + overrides)."""
        if "dram" not in self._cache:
            # deferred: loads numba (only cycle-level runs and nest searches need it)
            from archsim.sim.dram import dram_preset

            kw: dict[str, Any] = {"channels": self.channels, "refresh": self.refresh,
                                  "timing": dict(self.timing),
                                  # one MAC command per processing-unit cycle
                                  "latency_overrides": (("MACAB", "MACAB",
                                                         self.mac_interval_tck),)}
            if self.tck_ps > 0:
                kw["tck_ps"] = self.tck_ps
            self._cache["dram"] = dram_preset(self.dram_preset, **kw)
        return self._cache["dram"]

    @property
    def mac_interval_tck(self) -> int:
        """tCK between MAC commands of one channel: one processing-unit cycle."""
        return max(1, math.ceil(1.0 / self.mac_clock_ratio - 1e-9))
