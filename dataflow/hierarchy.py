"""N-level storage hierarchies with spatial fan-outs, for loop-nest analysis.

A :class:`Hierarchy` is a chain of :class:`StorageLevel` (innermost first) above one
:class:`ComputeLevel`. A level may be a real buffer (capacity, block size, bandwidth,
per-action energies) or a *network-only* level (``network_only=True``): the point where a
container fans out to ``mesh_x * mesh_y`` children (Timeloop's ``inter_<name>_spatial``).
Spatial factors of a mapping live on the level that fans out; multicast (one parent read
delivered to every child that needs the same data) and spatial reduction (partial sums of
children that share an output combined on the way up) follow from the mapping in
:mod:`dataflow.nest`.

Energies are per *vector* access (one block of ``block_size`` words), as Accelergy's energy
reference table (ERT) gives them; Timeloop charges ``ceil(scalar/block_size)`` vector accesses
(timeloop ``src/model/buffer.cpp`` ``ComputeVectorAccesses``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["StorageLevel", "ComputeLevel", "Hierarchy"]


@dataclass(frozen=True)
class StorageLevel:
    """One storage (or network-only) level.

    Attributes:
        name: level name (matches the mapping's ``target``).
        instances: hardware instances of this level (product of the meshes above it).
        mesh_x, mesh_y: fan-out of this level to the level below (1 if none).
        size_words: capacity in words (``depth * width / datawidth``); None = unbounded.
        word_bits: bits per word (``datawidth``).
        block_size: words per vector access (``width / datawidth / cluster_size``).
        cluster_size: instances sharing one physical array (Timeloop ``cluster_size``).
        read_bw, write_bw: words/cycle per instance; None = unlimited.
        shared_bw: reads and writes share ``read_bw`` (one data bus, e.g. a DRAM channel;
            Timeloop's ``shared_bandwidth``); ``write_bw`` is then not used.
        energy_pj: per-vector-access energies ``read``, ``write`` (fill), ``update`` and
            ``leak`` (per instance per cycle), in pJ.
        network_only: True for a fan-out point that stores nothing.
        technology: ``DRAM`` or ``SRAM`` (DRAM never does in-place reduction in Timeloop).
    """

    name: str
    instances: int = 1
    mesh_x: int = 1
    mesh_y: int = 1
    size_words: int | None = None
    word_bits: int = 8
    block_size: int = 1
    cluster_size: int = 1
    read_bw: float | None = None
    write_bw: float | None = None
    energy_pj: dict[str, float] = field(default_factory=dict)
    network_only: bool = False
    technology: str = "SRAM"
    shared_bw: bool = False

    @property
    def fanout(self) -> int:
        """Children per instance (``mesh_x * mesh_y``)."""
        return self.mesh_x * self.mesh_y


@dataclass(frozen=True)
class ComputeLevel:
    """The arithmetic units.

    Attributes:
        name: component name (``mac``).
        instances: number of MAC units.
        energy_pj: ``compute`` energy per MAC (pJ), optional ``leak`` per instance-cycle.
        word_bits: operand width (for display).
    """

    name: str
    instances: int
    energy_pj: dict[str, float] = field(default_factory=dict)
    word_bits: int = 8


@dataclass(frozen=True)
class Hierarchy:
    """Storage levels (innermost first) above one compute level.

    Attributes:
        levels: storage and network-only levels, innermost first.
        compute: the MAC array.
        name: design name.
    """

    levels: tuple[StorageLevel, ...]
    compute: ComputeLevel
    name: str = "design"

    def index(self, name: str) -> int:
        """Position of level ``name`` (0 = innermost); KeyError if none."""
        for i, lv in enumerate(self.levels):
            if lv.name == name:
                return i
        raise KeyError(name)
