"""The hardware-family contract: :class:`Unit`, its :class:`Estimate`, and the registry.

A hardware family is one module in ``arch/`` that defines a frozen ``*Spec`` dataclass and
a :class:`Unit` subclass decorated with :func:`register` under its YAML ``kind:``. Nothing
else is edited to add a family: ``arch.registry`` imports every module of the package.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from workloads.ops import Op

__all__ = ["Estimate", "Unit", "register", "UNIT_KINDS", "infeasible"]


@dataclass(frozen=True)
class Estimate:
    """Fast (analytical) prediction for one op on one unit.

    Attributes:
        op_name, op_kind: the op.
        unit: the unit's name within its accelerator.
        dataflow: the dataflow / kernel used (``ws``, ``os``, ``gemm_tc``, ``gemv`` ...).
        cycles: latency in cycles of ``clock_hz`` (int).
        clock_hz: the unit's clock.
        macs: dense MACs of the op; ``flops`` its operations.
        dram_read_bytes, dram_write_bytes: off-chip traffic.
        actions: ``(component name, action) -> count`` for the energy model.
        utilization: achieved / peak compute throughput for matrix ops (vector ops: of the
            vector throughput), in [0, 1].
        bound: what limits latency: ``compute``, ``memory``, ``latency`` (fixed overheads).
        mapping: human-readable description of the tiling/mapping.
        feasible: False if the op cannot run on this unit; then ``reason`` says why and the
            other numbers are meaningless.
        details: extra named numbers (cycles per phase, waves, row-hit rate ...).
    """

    op_name: str
    op_kind: str
    unit: str
    dataflow: str
    cycles: int
    clock_hz: float
    macs: int = 0
    flops: int = 0
    dram_read_bytes: float = 0.0
    dram_write_bytes: float = 0.0
    actions: Mapping[tuple[str, str], float] = field(default_factory=lambda: MappingProxyType({}))
    utilization: float = 0.0
    bound: str = "compute"
    mapping: str = ""
    feasible: bool = True
    reason: str = ""
    details: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def latency_s(self) -> float:
        """Latency in seconds."""
        return self.cycles / self.clock_hz

    @property
    def dram_bytes(self) -> float:
        return self.dram_read_bytes + self.dram_write_bytes


def infeasible(op: Op, unit: str, reason: str, clock_hz: float = 1.0) -> Estimate:
    """An Estimate that says ``op`` cannot run on ``unit`` and why."""
    return Estimate(op.name, op.kind, unit, "-", 0, clock_hz, feasible=False, reason=reason)


class Unit(ABC):
    """One hardware unit (a sub-accelerator) of an accelerator.

    Contract:
        * Constructors store; they do not compute or read files.
        * ``supports(op)`` returns None when the unit can run ``op`` or a reason string.
        * ``estimate(op, mapping)`` never returns a latency below the roofline bound
          ``max(effective MACs / peak MAC rate, compulsory bytes / peak bandwidth)``
          (``roofline_cycles``), for any op it supports. It returns an infeasible
          Estimate (not an exception) for an op it cannot run.
        * ``estimate`` is deterministic and side-effect free.
        * ``lower(op, mapping)`` returns a ``sim.TaskGraph`` whose simulated makespan is the
          reference for ``estimate``; families without cycle fidelity raise
          ``NotImplementedError``.
        * ``simulate(op, mapping)`` returns the cycle-fidelity latency in the unit's clock;
          by default it runs ``lower``'s TaskGraph through ``sim.run``. Families with their
          own command-level engine (DRAM PIM) override it instead of ``lower``.
        * ``components()`` lists the energy/area components; every action key an Estimate
          or TaskGraph emits names one of them.
        * ``report()`` returns family-specific, JSON-able objects for ``Result.extra``
          (FPGA ``resources``); empty by default.
    """

    kind: ClassVar[str] = ""
    Spec: ClassVar[type] = object

    def __init__(self, name: str, spec: Any, node_nm: float = 45.0) -> None:
        self.name = name
        self.spec = spec
        self.node_nm = node_nm

    # ---- identity / clocks -------------------------------------------------------------
    @property
    @abstractmethod
    def clock_hz(self) -> float:
        """The unit's clock in Hz (cycles in Estimates are in this clock)."""

    # ---- capability --------------------------------------------------------------------
    def supports(self, op: Op) -> str | None:
        """None if ``op`` can run here, else the reason it cannot."""
        return None

    def dataflows(self) -> tuple[str, ...]:
        """Named dataflows / kernels this unit can use."""
        return ()

    def native_formats(self) -> tuple[str, ...]:
        """Number formats (``workloads.formats`` names) the unit's datapath computes in
        natively, preferred first. The CLI uses them as the default activation and weight
        formats when none is given, and lists them when a format is refused. () (default):
        no preference (the workload's own formats)."""
        return ()

    # ---- roofline ----------------------------------------------------------------------
    @abstractmethod
    def peak_macs_per_cycle(self, op: Op) -> float:
        """Peak MACs per cycle for ``op``'s formats (vector ops: vector ops per cycle)."""

    @abstractmethod
    def peak_bytes_per_cycle(self) -> float:
        """Peak off-chip bandwidth in bytes per cycle."""

    def roofline_cycles(self, op: Op) -> float:
        """Lower bound on cycles: max(work / peak rate, compulsory bytes / bandwidth)."""
        work = op.effective_macs() if op.is_matrix else op.vector_ops()
        rate = self.peak_macs_per_cycle(op)
        compute = work / rate if rate > 0 else 0.0
        memory = op.min_bytes() / self.peak_bytes_per_cycle()
        return max(compute, memory)

    # ---- models ------------------------------------------------------------------------
    @abstractmethod
    def estimate(self, op: Op, mapping: Any = None) -> Estimate:
        """Analytical prediction for ``op`` (see the class contract)."""

    def lower(self, op: Op, mapping: Any = None) -> Any:
        """Lower ``op`` to a ``sim.TaskGraph`` for cycle simulation."""
        raise NotImplementedError(f"unit kind {self.kind!r} has no cycle-level lowering yet")

    def simulate(self, op: Op, mapping: Any = None) -> int:
        """Cycle-fidelity latency of ``op`` in cycles of ``clock_hz``.

        Default: simulate ``lower(op, mapping)`` with the event engine. Raises
        ``NotImplementedError`` when the family has no cycle-level model.
        """
        import sim

        tg = self.lower(op, mapping)
        kwargs = getattr(tg, "run_kwargs", None) or {}
        stats = sim.run(tg, **kwargs)
        # TaskGraph cycles are in the graph's clock; convert to the unit's clock.
        return int(math.ceil(stats.makespan_cycles * self.clock_hz / tg.clock_hz - 1e-9))

    def report(self) -> dict[str, Any]:
        """Family-specific, JSON-able objects added to ``Result.extra`` (default none)."""
        return {}

    def memory_capacity_bytes(self) -> float:
        """Capacity of the unit's off-chip memory in bytes (0 = not modelled / unchecked).

        Default: ``spec.memory.capacity_gb`` when the spec has a ``MemorySpec``; families
        whose memory is described otherwise (DRAM PIM) override it.
        """
        mem = getattr(self.spec, "memory", None)
        return float(getattr(mem, "capacity_gb", 0.0) or 0.0) * 1e9

    @abstractmethod
    def components(self) -> list[Any]:
        """Energy/area components (``energy.Component``), names prefixed by the unit name."""

    def cname(self, part: str) -> str:
        """Component name ``<unit>.<part>``."""
        return f"{self.name}.{part}"


UNIT_KINDS: dict[str, type[Unit]] = {}


def register(cls: type[Unit]) -> type[Unit]:
    """Class decorator: register a Unit subclass under its ``kind``."""
    if not cls.kind:
        raise TypeError(f"{cls.__name__} has no kind")
    if cls.kind in UNIT_KINDS and UNIT_KINDS[cls.kind] is not cls:
        raise TypeError(f"unit kind {cls.kind!r} registered twice")
    UNIT_KINDS[cls.kind] = cls
    return cls


def ceil_div(a: int, b: int) -> int:
    """Integer ceiling division."""
    return -(-a // b)


def cycles_of(x: float) -> int:
    """Round a cycle count up to an int (cycles are integers)."""
    return int(math.ceil(x - 1e-6)) if x > 0 else 0
