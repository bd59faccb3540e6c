"""The Unit contract over every registered family x every reference config x a set of ops
(``tests/arch/contract.py``), and toy units that break it on purpose: the checker must
catch them, so the contract suite can fail.

No family clamps its estimate to the roofline: each estimate is checked against
``roofline_cycles`` as the model computes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import pytest

import archsim
from archsim.arch.base import UNIT_KINDS, DataflowMapping, Estimate, Unit, cycles_of, infeasible
from archsim.workloads.errors import MappingError
from archsim.workloads.ops import Gemm, Op
from tests.arch.contract import contract_problems, design_problems, ops_for, unsupported_op

CONFIGS = archsim.list_configs()
IDS = [f"{c.parent.name}/{c.stem}" for c in CONFIGS]


def _units():
    return [(cfg, u) for cfg in CONFIGS for u in archsim.load(cfg).units]


UNITS = _units()
UNIT_IDS = [f"{c.parent.name}/{c.stem}:{u.name}" for c, u in UNITS]


def test_every_registered_family_has_a_reference_config():
    kinds = {u.kind for _, u in UNITS}
    assert set(UNIT_KINDS) <= kinds, set(UNIT_KINDS) - kinds


@pytest.mark.parametrize("cfg_unit", UNITS, ids=UNIT_IDS)
def test_contract_on_reference_designs(cfg_unit):
    _, unit = cfg_unit
    problems = design_problems(unit)
    for op in [*ops_for(unit), unsupported_op()]:
        problems += contract_problems(unit, op)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("cfg_unit", UNITS, ids=UNIT_IDS)
def test_estimate_of_unknown_dataflow_is_a_mapping_error(cfg_unit):
    _, unit = cfg_unit
    op = ops_for(unit)[0]
    with pytest.raises(MappingError, match="dataflow"):
        unit.estimate(op, "no_such_dataflow")


# ---- estimate vs simulation ------------------------------------------------------------
#: Stated tolerance of estimate vs cycle simulation on one uncontended op (a 512 x 1024 x
#: 1024 GEMM and an RMS norm), per family. Residuals: GPU/LUT, the CTA-tile pipeline's
#: fill, tail waves and max() of near-saturated resources (measured +11% A100, +22% H100;
#: tests/gpu/test_gpu_lower.py bounds the worst shape at 25%); DRAM PIM, the closed form
#: spreads RDMAC gaps and refresh evenly (-3%; tests/pim bound GEMVs at 10%); spatial
#: arrays and the FPGA lower the same fold / tile schedule (< 0.5%; norms < 4%).
SIM_TOLERANCE = {"spatial_array": 0.05, "tensor_core_gpu": 0.25, "lut_tensor_core": 0.25,
                 "dram_pim": 0.10, "nm_sparse_fpga": 0.05}


@pytest.mark.parametrize("cfg_unit", UNITS, ids=UNIT_IDS)
def test_estimate_agrees_with_simulation(cfg_unit):
    _, unit = cfg_unit
    tol = SIM_TOLERANCE[unit.kind]
    ops = ops_for(unit)
    for op in [replace(ops[0], m=512, n=1024, k=1024), *(o for o in ops if o.name == "norm")]:
        est = unit.estimate(op)
        if not est.feasible:
            continue
        try:
            sim = unit.simulate(op)
        except NotImplementedError:
            pytest.skip(f"{unit.kind} has no lowering")
        assert sim == pytest.approx(est.cycles, rel=tol), (op.name, est.cycles, sim)


@pytest.mark.parametrize("cfg_unit", UNITS, ids=UNIT_IDS)
def test_lower_returns_a_sim_input_that_simulate_uses(cfg_unit):
    _, unit = cfg_unit
    op = ops_for(unit)[0]
    if unit.supports(op):
        pytest.skip("op not supported")
    si = unit.lower(op)
    stats = si.run()
    expect = math.ceil(stats.makespan_cycles * unit.clock_hz / si.graph.clock_hz - 1e-9)
    assert unit.simulate(op) == expect


# ---- the checker catches broken units --------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class _ToySpec:
    macs_per_cycle: float = 16.0
    bytes_per_cycle: float = 8.0


class _Toy(Unit[DataflowMapping]):
    """A tiny honest unit: cycles = max(MACs / rate, bytes / bandwidth)."""

    kind = "toy_contract"
    Spec = _ToySpec
    speedup = 1.0          # > 1 makes it beat its own roofline
    stray_action = False   # True makes it emit an action on a component it does not list

    @property
    def clock_hz(self) -> float:
        return 1e9

    def dataflows(self) -> tuple[str, ...]:
        return ("only",)

    def peak_macs_per_cycle(self, op: Op) -> float:
        return self.spec.macs_per_cycle

    def peak_bytes_per_cycle(self) -> float:
        return self.spec.bytes_per_cycle

    def estimate(self, op: Op, mapping: Any = None) -> Estimate:
        self.parse_mapping(mapping)
        if not isinstance(op, Gemm):
            return infeasible(op, self.name, "toy runs GEMMs only", self.clock_hz)
        cyc = cycles_of(self.roofline_cycles(op) / self.speedup)
        acts = {(self.cname("mac"), "mac"): float(op.macs())}
        if self.stray_action:
            acts[("elsewhere.thing", "read")] = 1.0
        return Estimate(op.name, op.kind, self.name, "only", cyc, self.clock_hz,
                        macs=op.macs(), actions=MappingProxyType(acts))

    def components(self) -> list[Any]:
        from archsim.energy import Component

        return [Component(self.cname("mac"), "mac", 16, {"format": "fp16"})]


def _toy(**attrs: Any) -> _Toy:
    u = _Toy("toy", _ToySpec())
    for k, v in attrs.items():
        setattr(u, k, v)
    return u


GEMM = Gemm(name="g", m=64, n=64, k=64)


def test_honest_toy_keeps_the_contract():
    assert contract_problems(_toy(), GEMM) == []
    assert design_problems(_toy()) == []


def test_checker_catches_an_estimate_below_the_roofline():
    # roofline: 64^3 MACs / 16 per cycle = 16384 cycles; the broken unit claims half.
    problems = contract_problems(_toy(speedup=2.0), GEMM)
    assert any("beats the roofline bound 16384" in p for p in problems), problems


def test_checker_catches_actions_on_unknown_components():
    problems = contract_problems(_toy(stray_action=True), GEMM)
    assert any("unknown components ['elsewhere.thing']" in p for p in problems), problems


def test_checker_catches_a_nondeterministic_estimate():
    class Flaky(_Toy):
        calls = 0

        def estimate(self, op: Op, mapping: Any = None) -> Estimate:
            Flaky.calls += 1
            e = super().estimate(op, mapping)
            return Estimate(e.op_name, e.op_kind, e.unit, e.dataflow, e.cycles + Flaky.calls,
                            e.clock_hz, macs=e.macs, actions=e.actions)

    problems = contract_problems(Flaky("toy", _ToySpec()), GEMM)
    assert any("not deterministic" in p for p in problems), problems


def test_checker_catches_a_mapping_parser_that_accepts_nonsense():
    class Lax(_Toy):
        def parse_mapping(self, obj: Any) -> DataflowMapping:
            return DataflowMapping()

    problems = design_problems(Lax("toy", _ToySpec()))
    assert len(problems) == 4 and "did not raise MappingError" in problems[0], problems
