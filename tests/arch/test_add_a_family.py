"""How to add a hardware family (docs/architecture.md), enforced: a toy family built only
from its own package (``tests/arch/toy_family``) is loaded from YAML, evaluated at both
fidelities, mapped, pinned as golden predictions and validated, with nothing edited in
``archsim/`` or ``arch/``; and it keeps the Unit contract."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import archsim
from archsim.arch.base import UNIT_KINDS
from archsim.arch.reference import CHECKS, REFERENCE_WORKLOADS, reference_workloads
from archsim.workloads.ops import Gemm
from tests.arch.contract import contract_problems, design_problems

TOY_YAML = Path(__file__).with_name("toy_family") / "toy.yaml"


@pytest.fixture
def toy():
    """Import the toy package (it registers itself) and remove it afterwards, so the rest of
    the suite sees only the real families."""
    mod = importlib.import_module("tests.arch.toy_family")
    # (re-)register: the import registered it once; an earlier test's teardown removed it
    UNIT_KINDS[mod.KIND] = mod.ToyVector
    CHECKS["toy"] = mod._toy_checks
    reference_workloads(mod.KIND, mod.WORKLOADS)
    yield mod
    UNIT_KINDS.pop(mod.KIND, None)
    CHECKS.pop("toy", None)
    REFERENCE_WORKLOADS.pop(mod.KIND, None)


def test_step1_yaml_loads_through_the_registry(toy):
    acc = archsim.load(TOY_YAML)
    assert type(acc.units[0]) is toy.ToyVector and acc.units[0].spec.lanes == 64


def test_step2_evaluate_and_cycle_fidelity(toy):
    acc = archsim.load(TOY_YAML)
    wl = archsim.gemm_workload(1024, 1024, 1024)
    ra = archsim.evaluate(acc, wl)
    rc = archsim.evaluate(acc, wl, fidelity="cycle")
    # 1024^3 MACs / 64 per cycle = 16,777,216 cycles at 1 GHz
    assert ra.cycles == rc.cycles == 1024**3 // 64
    assert ra.energy_j > 0 and ra.area_mm2 > 0


def test_step3_the_mapper_searches_its_mapping_space(toy):
    acc = archsim.load(TOY_YAML)
    res = archsim.evaluate(acc, archsim.gemm_workload(64, 64, 64), mapping="search")
    assert res.ops[0].dataflow == "stream"


def test_step4_golden_workloads_come_from_the_package(toy):
    from archsim import golden

    pred = golden.predict(TOY_YAML)
    assert set(pred) == {"gemm_256"}
    assert pred["gemm_256"]["cycles"] == 256**3 // 64        # compute-bound closed form


def test_step5_validation_runs_the_package_checks(toy):
    from archsim import validation

    comps, gaps = validation.run(["toy"])
    assert [c.ok for c in comps] == [True] and gaps[0].family == "toy"


def test_step6_it_keeps_the_unit_contract(toy):
    u = archsim.load(TOY_YAML).units[0]
    assert design_problems(u) == []
    assert contract_problems(u, Gemm(name="g", m=128, n=96, k=200)) == []
