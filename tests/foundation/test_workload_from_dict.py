"""``archsim.workload_from_dict``: the one dict -> Workload builder (golden references and
sweep tasks use it). Expected workloads are built with the explicit public calls."""

from __future__ import annotations

import pytest

import archsim
from archsim import golden
from archsim.workloads.errors import WorkloadError


def _ops(w):
    return [repr(op) for op in w.ops()], sorted(w.graph.edges()), w.parameters


def test_gemm_dict_is_gemm_workload():
    got = archsim.workload_from_dict({"gemm": (16, 8192, 8192), "a_format": "fp16",
                                      "w_format": "int4", "batch": 2})
    want = archsim.gemm_workload(16, 8192, 8192, batch=2, a_format="fp16", w_format="int4")
    assert _ops(got) == _ops(want)


def test_model_dict_with_sparsity_is_workload_then_with_sparsity():
    got = archsim.workload_from_dict({"model": "resnet18", "phase": "train", "batch": 8,
                                      "sparsity": (2, 8)})
    want = archsim.workload("resnet18", phase="train", batch=8).with_sparsity(2, 8)
    assert _ops(got) == _ops(want)
    # 2:8 keeps a quarter of the weights of the pruned layers
    fracs = {op.w_sparsity.fraction for op in got.ops() if hasattr(op, "w_sparsity")}
    assert 0.25 in fracs


def test_none_values_take_the_defaults():
    got = archsim.workload_from_dict({"model": "gpt2-small", "phase": "decode", "context": 32,
                                      "seq": None, "a_format": None, "sparsity": None})
    want = archsim.workload("gpt2-small", phase="decode", context=32)
    assert _ops(got) == _ops(want)


def test_every_golden_reference_dict_builds():
    for kind, table in golden.reference_workloads().items():
        for label, spec in table.items():
            assert archsim.workload_from_dict(spec).ops(), (kind, label)


@pytest.mark.parametrize("spec, path, words", [
    ({"gemm": [8, 8, 8], "phase": "decode"}, "phase", "allowed: gemm, batch"),
    ({"model": "gpt2-small", "acc_format": "fp32"}, "acc_format", "allowed: model, phase"),
    ({"model": "gpt2-small", "seqlen": 128}, "seqlen", "unknown key for a model workload"),
    ({"gemm": [8, 8], "a_format": "int8"}, "gemm", "expected [m, n, k]"),
    ({"gemm": "8x8x8"}, "gemm", "expected [m, n, k]"),
    ({"model": "resnet18", "sparsity": (8, 2)}, "sparsity", "1 <= n <= m"),
    ({"model": "resnet18", "sparsity": 2}, "sparsity", "expected [n, m]"),
])
def test_bad_dict_names_the_key(spec, path, words):
    with pytest.raises(WorkloadError) as ei:
        archsim.workload_from_dict(spec)
    assert ei.value.problems[0].path == path
    assert words in str(ei.value)


@pytest.mark.parametrize("spec", [{}, {"batch": 2}, {"gemm": [8, 8, 8], "model": "resnet18"}])
def test_needs_exactly_one_kind(spec):
    with pytest.raises(WorkloadError, match="exactly one of gemm or model"):
        archsim.workload_from_dict(spec)


def test_every_unknown_key_is_reported_at_once():
    with pytest.raises(WorkloadError) as ei:
        archsim.workload_from_dict({"model": "resnet18", "foo": 1, "bar": 2})
    assert [p.path for p in ei.value.problems] == ["foo", "bar"]
