"""The hardware-family contract: :class:`Unit`, its :class:`Estimate`, and the registry.

A hardware family is one module in ``arch/`` that defines a frozen ``*Spec`` dataclass and
a :class:`Unit` subclass decorated with :func:`register` under its YAML ``kind:``. Nothing
else is edited to add a family: ``arch.registry`` imports every module of the package.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from archsim.workloads.errors import MappingError, Problem
from archsim.workloads.formats import NumberFormat
from archsim.workloads.ops import Op

__all__ = ["Estimate", "Unit", "register", "UNIT_KINDS", "infeasible", "UnitMapping",
           "DataflowMapping", "MappingConstraints", "SimInput"]


@dataclass(frozen=True)
class UnitMapping:
    """Base of every family's mapping: frozen, hashable, with a named dataflow / kernel.

    ``dataflow == ""`` means "the unit's default" (its configured dataflow, or the best
    kernel its own heuristics pick). Families subclass this with their own fields (tile
    sizes, split-K, a loop nest); :meth:`Unit.parse_mapping` builds one from user input.
    """

    dataflow: str = ""

    def describe(self) -> str:
        """A short human-readable form (``default`` when nothing is fixed)."""
        parts = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                 if f.name != "dataflow" and getattr(self, f.name) is not None]
        return " ".join([self.dataflow or "default", *parts])


@dataclass(frozen=True)
class DataflowMapping(UnitMapping):
    """A mapping that only names a dataflow (families without tunable tilings)."""


class MappingConstraints(Protocol):
    """What :meth:`Unit.mapping_space` reads of the user's per-op constraints
    (``mapper.constraints.OpConstraint`` satisfies it): the allowed dataflow names, or
    None for any."""

    @property
    def dataflows(self) -> tuple[str, ...] | None: ...


@dataclass(frozen=True)
class SimInput:
    """Everything the event engine needs to simulate one lowered op (``Unit.lower``).

    Attributes:
        graph: the ``sim.TaskGraph`` (its own clock, ``graph.clock_hz``).
        dram_configs: ``sim.DramSpec`` per DRAM resource of the graph (command-level memory).
        note: what the tasks stand for, when a family's lowering summarises a reference
            engine of its own (the DRAM PIM command replay gives one task per channel whose
            duration is that channel's replayed command time).
    """

    graph: Any
    dram_configs: tuple[Any, ...] = ()
    note: str = ""

    def run(self, record_task_times: bool = False) -> Any:
        """``sim.run`` of this input; returns ``sim.SimStats`` in the graph's clock."""
        # deferred: loads numba (only cycle-level runs and nest searches need it)
        from archsim import sim

        return sim.run(self.graph, self.dram_configs, record_task_times=record_task_times)


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

    def renamed(self, op_name: str) -> Estimate:
        """This estimate under another op's name, every other field shared (the estimate of
        an identical op: ``mapper.map_workload``'s reuse). Equal to
        ``dataclasses.replace(self, op_name=op_name)``, without re-running ``__init__``
        (nothing else changes, so there is nothing to re-check): a network's repeated
        layers are renamed hundreds of times per evaluation."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__["op_name"] = op_name
        return new


def infeasible(op: Op, unit: str, reason: str, clock_hz: float = 1.0) -> Estimate:
    """An Estimate that says ``op`` cannot run on ``unit`` and why."""
    return Estimate(op.name, op.kind, unit, "-", 0, clock_hz, feasible=False, reason=reason)


M = TypeVar("M", bound=UnitMapping)


class Unit(ABC, Generic[M]):
    """One hardware unit (a sub-accelerator) of an accelerator, generic over its frozen
    mapping type ``M`` (a :class:`UnitMapping` subclass named by ``Mapping``).

    Contract:
        * Constructors store; they do not compute or read files.
        * ``supports(op)`` returns None when the unit can run ``op`` or a reason string.
        * ``parse_mapping(obj)`` turns None (the default), a dataflow name, a dict of the
          mapping's fields or an ``M`` into a validated ``M``; anything else raises
          ``MappingError`` naming what was wrong. Every method that takes a ``mapping``
          accepts what ``parse_mapping`` accepts.
        * ``mapping_space(op, constraints)`` lists the candidate mappings of ``op`` (the
          default first) that the constraints allow; the mapper searches over it for every
          family. A unit with a loop-nest space (``loop_nest(op)`` is not None) is also
          searched by the mapper's vectorised loop-nest search, whose mappings it accepts.
        * ``estimate(op, mapping)`` never returns a latency below the roofline bound
          ``roofline_cycles(op, mapping)`` for any op it supports: no clamp enforces it, the
          model must respect it (``tests/arch/test_unit_contract.py``). It returns an
          infeasible Estimate (not an exception) for an op it cannot run or a mapping that
          does not apply to the op.
        * ``estimate`` is deterministic and side-effect free.
        * ``lower(op, mapping)`` returns a :class:`SimInput` whose simulated makespan is the
          cycle-fidelity reference for ``estimate``; families without cycle fidelity raise
          ``NotImplementedError``. ``simulate`` runs it (every family, no override needed),
          and ``archsim trace`` draws it.
        * ``components()`` lists the energy/area components; every action key an Estimate
          or TaskGraph emits names one of them.
        * ``report()`` returns family-specific, JSON-able objects for ``Result.extra``
          (FPGA ``resources``); empty by default.
    """

    kind: ClassVar[str] = ""
    Spec: ClassVar[type] = object
    #: The family's frozen mapping type (a :class:`UnitMapping` subclass).
    Mapping: ClassVar[type[UnitMapping]] = DataflowMapping

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

    def sparse_weight_loads(self) -> str | None:
        """None if this unit runs unstructured-sparse weights as sparse loads + dense MMA
        (bitmap-encoded weights expanded on chip: Flash-LLM / SpInfer), else the reason it
        cannot (``--weight-sparsity`` is refused with it)."""
        return (f"a {self.kind} unit has no sparse-load + dense-compute kernel (Flash-LLM / "
                f"SpInfer expand compressed weights in a tensor-core GPU's shared memory)")

    # ---- mappings ----------------------------------------------------------------------
    def parse_mapping(self, obj: Any) -> M:
        """A validated mapping of this family from user input (see the class contract).

        Accepts None (the default mapping), a dataflow name, a dict of the mapping type's
        fields, or an instance of the mapping type; ``check_mapping`` validates the values.

        Raises:
            MappingError: an unknown dataflow, unknown keys, wrong value types, or an
                object of another type, naming the key.
        """
        cls = self.Mapping
        if obj is None:
            m: Any = cls()
        elif isinstance(obj, cls):
            m = obj
        elif isinstance(obj, str):
            m = cls(dataflow=obj)
        elif isinstance(obj, Mapping):   # collections.abc.Mapping: a dict of fields
            names = [f.name for f in fields(cls)]
            unknown = sorted(set(obj) - set(names))
            if unknown:
                raise MappingError(Problem(f"unknown mapping keys {unknown}; allowed: "
                                           f"{', '.join(names)}", "mapping"))
            try:
                m = cls(**{k: self._mapping_value(k, v) for k, v in obj.items()})
            except (TypeError, ValueError) as exc:
                raise MappingError(Problem(f"bad mapping {dict(obj)!r}: {exc}",
                                           "mapping")) from None
        else:
            m = self.convert_mapping(obj)
        if not isinstance(m.dataflow, str):
            raise MappingError(Problem(f"expected a dataflow name, got {m.dataflow!r}",
                                       "mapping.dataflow"))
        self.check_mapping(m)
        return m  # type: ignore[no-any-return]

    def _mapping_value(self, key: str, value: Any) -> Any:
        """A dict value of ``parse_mapping`` as the mapping field wants it (lists ->
        tuples, so the mapping stays hashable)."""
        return tuple(value) if isinstance(value, list) else value

    def convert_mapping(self, obj: Any) -> M:
        """Hook of ``parse_mapping`` for family-specific inputs (a loop nest); the default
        refuses them."""
        raise MappingError(Problem(
            f"expected None, a dataflow name, a dict or a {self.Mapping.__name__}, got "
            f"{type(obj).__name__}", "mapping"))

    def check_mapping(self, m: M) -> None:
        """Validation of a parsed mapping (raise ``MappingError``); the default checks that
        the dataflow is one of ``dataflows()``. Families that add fields extend it (and
        call it for the dataflow)."""
        if m.dataflow and m.dataflow not in self.dataflows():
            raise MappingError(Problem(
                f"unknown dataflow {m.dataflow!r} for a {self.kind} unit; expected one of: "
                f"{', '.join(self.dataflows()) or '(none)'}", "mapping.dataflow"))

    def op_dataflows(self, op: Op) -> tuple[str, ...]:
        """The dataflows worth trying for ``op`` (default: all of ``dataflows()``); the
        estimate of one that does not apply is infeasible, not an error."""
        return self.dataflows()

    def mapping_space(self, op: Op, constraints: MappingConstraints | None = None
                      ) -> tuple[M, ...]:
        """Candidate mappings of ``op``: the default (when no dataflow is constrained)
        then one per dataflow of ``op_dataflows(op)`` that ``constraints`` allow."""
        allowed = constraints.dataflows if constraints is not None else None
        out: list[M] = [] if allowed is not None else [self.parse_mapping(None)]
        for df in self.op_dataflows(op):
            if allowed is None or df in allowed:
                out.append(self.parse_mapping(df))
        return tuple(dict.fromkeys(out))

    def loop_nest(self, op: Op) -> Any | None:
        """Parameters of the loop-nest space of ``op`` (``dataflow.ArchParams``) when the
        mapper's loop-nest search applies to this unit, else None (the default)."""
        return None

    def einsum_space(self, op: Op) -> tuple[Any, Any] | None:
        """``(dataflow.einsum.Einsum, dataflow.hierarchy.Hierarchy)`` of ``op`` when the
        mapper's 7-D Einsum nest search applies to it on this unit (``parse_mapping``
        then takes the ``dataflow.nest.NestMapping`` it finds), else None (the default)."""
        return None

    def host_runtime(self) -> tuple[str, str]:
        """(name, one-line note) of the host software stack the unit models, when its
        estimates add host dispatch time (``wall_s`` in ``Estimate.details``); ("", "")
        (default) for none (an ideal host)."""
        return "", ""

    def fused_attention(self) -> bool:
        """True when the unit runs attention as one fused kernel (``workloads.ops.Attention``,
        FlashAttention-style) by default; the zoo then builds one Attention op per layer
        for designs of it (``archsim.api.preferred_attention``). Default: False."""
        return False

    def attention_kernels(self) -> tuple[str, ...]:
        """How the unit can be asked to price an ``Attention`` call (``Attention.kernel``,
        ``workloads.ops.ATTENTION_KERNELS``) with a model of its own: ``paged`` when it
        models a serving framework's paged-KV backend. () (default): one model for every
        call (``archsim.api.device_build`` refuses ``--attention-kernel paged`` then)."""
        return ()

    def native_formats(self) -> tuple[str, ...]:
        """Number formats (``workloads.formats`` names) the unit's datapath computes in
        natively, preferred first. The CLI uses them as the default activation and weight
        formats when none is given, and lists them when a format is refused. () (default):
        no preference (the workload's own formats)."""
        return ()

    def lacks_compute_format(self, fmt: NumberFormat) -> str | None:
        """Why this unit has no datapath computing with activations in ``fmt`` (None: it has
        one, or runs it some other way). A run, plan or serving replica asking for such an
        activation format is refused with this reason (bf16 on a V100, fp8 on an A100).
        Default: None (the family converts or widens as its model says)."""
        return None

    # ---- roofline ----------------------------------------------------------------------
    @abstractmethod
    def peak_macs_per_cycle(self, op: Op) -> float:
        """Peak MACs per cycle for ``op``'s formats (vector ops: vector ops per cycle)."""

    @abstractmethod
    def peak_bytes_per_cycle(self) -> float:
        """Peak off-chip bandwidth in bytes per cycle."""

    def roofline_cycles(self, op: Op, mapping: Any = None) -> float:
        """Lower bound on cycles: max(work / peak rate, compulsory bytes / bandwidth).

        ``mapping`` matters only where it changes the compulsory traffic (a fused
        attention keeps its scores on chip)."""
        work = op.effective_macs() if op.is_matrix else op.vector_ops()
        rate = self.peak_macs_per_cycle(op)
        compute = work / rate if rate > 0 else 0.0
        memory = op.min_bytes() / self.peak_bytes_per_cycle()
        return max(compute, memory)

    # ---- models ------------------------------------------------------------------------
    @abstractmethod
    def estimate(self, op: Op, mapping: Any = None) -> Estimate:
        """Analytical prediction for ``op`` (see the class contract)."""

    def lower(self, op: Op, mapping: Any = None) -> SimInput:
        """Lower ``op`` to a :class:`SimInput` for cycle simulation."""
        raise NotImplementedError(f"unit kind {self.kind!r} has no cycle-level lowering yet")

    def simulate(self, op: Op, mapping: Any = None) -> int:
        """Cycle-fidelity latency of ``op`` in cycles of ``clock_hz``: the event engine's
        makespan of ``lower(op, mapping)``, converted from the graph's clock.

        Raises:
            NotImplementedError: the family has no cycle-level model.
            MappingError: ``op`` is not supported or the mapping is bad.
        """
        why = self.supports(op)
        if why:
            raise MappingError(Problem(why, op.name))
        si = self.lower(op, mapping)
        stats = si.run()
        return int(math.ceil(stats.makespan_cycles * self.clock_hz / si.graph.clock_hz - 1e-9))

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
