"""Shared serving fixtures: one design and model, and one iteration-cost memo per module
(the tests price the same iterations; sharing the memo keeps the suite fast)."""

from __future__ import annotations

import pytest

import archsim
from archsim.serve.cost import IterationCost

#: The model the serving tests run (dense, GQA-free: closed forms stay simple).
MODEL = "llama2-7b"


def full_latency(acc, phase: str, **kw) -> float:
    """Latency of one whole-model ``archsim.evaluate`` (the closed forms' building block)."""
    return archsim.evaluate(acc, archsim.workload(MODEL, phase, **kw)).latency_s


@pytest.fixture(scope="module")
def a100():
    return archsim.load("gpu/a100")


@pytest.fixture(scope="module")
def costs(a100):
    """One memo shared by a module's tests (same design and model)."""
    return {1: IterationCost(a100, MODEL, 1)}
