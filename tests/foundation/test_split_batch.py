"""``Workload.split_batch``: a nano-batch of a model is the model built at ``batch / k``, op
by op (the overlap schedule of ``archsim.evaluate(..., overlap=)`` prices one nano-batch)."""

from __future__ import annotations

import pytest

from archsim.api import workload
from archsim.workloads.errors import WorkloadError


@pytest.mark.parametrize("model,phase,kw", [
    ("llama3-8b", "prefill", {"seq": 64, "tp": 2}),
    ("llama3-8b", "decode", {"context": 100, "tp": 2}),
    ("llama3-8b", "decode", {"context": 100, "attention": "fused"}),
    ("llama3-8b", "prefill", {"seq": 64, "attention": "fused"}),
    ("gpt2-small", "prefill", {"seq": 32}),
    ("resnet18", None, {}),
])
@pytest.mark.parametrize("k", [2, 4])
def test_split_equals_the_model_built_at_the_smaller_batch(model, phase, kw, k):
    whole = workload(model, phase=phase, batch=8, **kw)
    piece = workload(model, phase=phase, batch=8 // k, **kw)
    got = whole.split_batch(k)
    assert got.batch == 8 // k and got.devices == whole.devices
    assert got.ops() == piece.ops()
    assert [got.predecessors(o.name) for o in got.ops()] == \
        [piece.predecessors(o.name) for o in piece.ops()]


def test_split_refuses_an_uneven_batch_naming_the_flag():
    with pytest.raises(WorkloadError, match="--overlap.*does not split into 3"):
        workload("llama3-8b", phase="decode", batch=8, context=100).split_batch(3)
    assert workload("gpt2-small", phase="prefill", seq=32).split_batch(1).batch == 1
