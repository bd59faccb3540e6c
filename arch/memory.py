"""Off-chip memory spec shared by the families.

Two fidelities (DESIGN.md, "Memory fidelity"): ``bandwidth`` (a server with a peak
bandwidth and an efficiency) and ``dram`` (command-level bank timing from a ``sim.dram``
preset). Analytical estimates always use ``bandwidth_gbps x efficiency``.
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.arch.spec import param
from archsim.energy import tables as _energy_tables

__all__ = ["MemorySpec", "DRAM_TECHS"]

#: DRAM technologies known to the energy library (the keys of
#: :data:`energy.tables.DRAM_TECHS`, their one home: energy per byte by technology).
DRAM_TECHS: tuple[str, ...] = tuple(_energy_tables.DRAM_TECHS)


@dataclass(frozen=True, kw_only=True)
class MemorySpec:
    """Off-chip memory."""

    bandwidth_gbps: float = param(doc="peak bandwidth", unit="GB/s (1e9 bytes/s)", min=0,
                                  min_exclusive=True)
    tech: str = param("hbm2e", doc="DRAM technology (energy per byte)", choices=DRAM_TECHS)
    efficiency: float = param(0.9, doc="sustained fraction of peak bandwidth for streaming",
                              min=0, max=1, min_exclusive=True)
    capacity_gb: float = param(0.0, doc="capacity (0 = unchecked)", unit="GB", min=0)
    model: str = param("bandwidth", doc="simulation fidelity of the memory",
                       choices=("bandwidth", "dram"))
    preset: str = param("", doc="sim.dram preset for model: dram (e.g. HBM2e, GDDR6, DDR4-2400)")

    def check(self) -> list[tuple[str, str]]:
        if self.model == "dram" and not self.preset:
            return [("preset", "model: dram needs a preset (a sim.dram preset name)")]
        return []

    def unused(self) -> list[tuple[str, str]]:
        """Keys the model does not read (:class:`archsim.arch.spec.UnusedKeyWarning`)."""
        if self.model == "bandwidth" and self.preset:
            return [("preset", "a sim.dram preset is read only with model: dram; this memory "
                     "is model: bandwidth (bandwidth_gbps x efficiency)")]
        return []

    @property
    def bytes_per_s(self) -> float:
        """Peak bandwidth in bytes/s."""
        return self.bandwidth_gbps * 1e9

    @property
    def sustained_bytes_per_s(self) -> float:
        return self.bytes_per_s * self.efficiency
