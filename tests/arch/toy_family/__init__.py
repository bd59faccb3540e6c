"""A toy hardware family built only from its own package (the checklist of
``docs/architecture.md``, "Adding a hardware family", enforced by
``tests/arch/test_add_a_family.py``): a spec, a registered Unit with a typed mapping, a
lowering to a SimInput, its golden workloads and a validation check. Nothing in
``archsim/`` or elsewhere in ``arch/`` knows about it.

Model: a ``lanes``-wide MAC vector at ``clock_mhz`` with a memory of ``bandwidth_gbps``;
an op takes ``max(MACs / lanes, bytes / bytes per cycle)`` cycles (its roofline exactly).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from archsim.arch.base import (
    DataflowMapping,
    Estimate,
    SimInput,
    Unit,
    cycles_of,
    infeasible,
    register,
)
from archsim.arch.memory import MemorySpec
from archsim.arch.reference import Comparison, EvaluationAPI, Gap, checks, reference_workloads
from archsim.arch.spec import param
from archsim.workloads.ops import Gemm, Op

KIND = "toy_vector"


@dataclass(frozen=True, kw_only=True)
class ToySpec:
    """A MAC vector and a memory."""

    lanes: int = param(doc="MACs per cycle", min=1)
    clock_mhz: float = param(doc="clock", unit="MHz", min=0, min_exclusive=True)
    memory: MemorySpec = param(doc="off-chip memory")

    def check(self) -> list[tuple[str, str]]:
        return []


@register
class ToyVector(Unit[DataflowMapping]):
    """Runs GEMMs (and nothing else) at ``max(compute, memory)``."""

    kind = KIND
    Spec = ToySpec
    Mapping = DataflowMapping
    spec: ToySpec

    @property
    def clock_hz(self) -> float:
        return self.spec.clock_mhz * 1e6

    def dataflows(self) -> tuple[str, ...]:
        return ("stream",)

    def supports(self, op: Op) -> str | None:
        return None if isinstance(op, Gemm) else "the toy runs GEMMs only"

    def peak_macs_per_cycle(self, op: Op) -> float:
        return float(self.spec.lanes)

    def peak_bytes_per_cycle(self) -> float:
        return self.spec.memory.bytes_per_s / self.clock_hz

    def estimate(self, op: Op, mapping: Any = None) -> Estimate:
        self.parse_mapping(mapping)
        why = self.supports(op)
        if why:
            return infeasible(op, self.name, why, self.clock_hz)
        cycles = cycles_of(self.roofline_cycles(op))
        acts = {(self.cname("mac"), "mac"): float(op.macs()),
                (self.cname("dram"), "read"): op.input_bytes() + op.weight_bytes(),
                (self.cname("dram"), "write"): op.output_bytes()}
        return Estimate(op.name, op.kind, self.name, "stream", cycles, self.clock_hz,
                        macs=op.macs(), flops=op.flops(), dram_read_bytes=op.input_bytes()
                        + op.weight_bytes(), dram_write_bytes=op.output_bytes(),
                        actions=MappingProxyType(acts), utilization=1.0)

    def lower(self, op: Op, mapping: Any = None) -> SimInput:
        from archsim.sim.taskgraph import TaskGraphBuilder

        b = TaskGraphBuilder(clock_hz=self.clock_hz)
        b.add_op(op.name)
        b.add_compute(b.add_server("lanes"), self.estimate(op, mapping).cycles)
        return SimInput(b.build())

    def components(self) -> list[Any]:
        from archsim.energy import Component

        return [Component(self.cname("mac"), "mac", self.spec.lanes, {"format": "fp16"}),
                Component(self.cname("dram"), "dram", 1, {"tech": self.spec.memory.tech})]


WORKLOADS = {"gemm_256": {"gemm": [256, 256, 256], "a_format": "fp16"}}
reference_workloads(KIND, WORKLOADS)


@checks("toy")
def _toy_checks(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    """The toy's only figure: a compute-bound 1024^3 GEMM on 64 lanes at 1 GHz takes
    1024^3 / 64 cycles = 16.78 ms (closed form)."""
    from pathlib import Path

    acc = api.load(Path(__file__).with_name("toy.yaml"))
    ms = api.evaluate(acc, api.gemm_workload(1024, 1024, 1024)).latency_s * 1e3
    return ([Comparison("toy", "1024^3 GEMM latency", "closed form", "D", 1024**3 / 64 / 1e6,
                        ms, "ms", 1e-6, "exact model", design="toy")],
            [Gap("toy", "anything measured", "a toy has no silicon")])
