"""Megatron-style tensor parallelism: one device's shard of a transformer graph."""

from __future__ import annotations

import pytest

import archsim
from archsim.workloads.errors import WorkloadError
from archsim.workloads.ops import AllReduce, Gemm
from archsim.workloads.zoo import build


def _linear_macs(w) -> int:
    return sum(o.macs() for o in w.ops() if isinstance(o, Gemm) and o.b_is_weight
               and o.role != "lm_head")


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_shards_split_the_linear_layers_exactly(tp):
    full = build("llama2-7b", phase="prefill", seq=256)
    shard = build("llama2-7b", phase="prefill", seq=256, tp=tp)
    # 32 heads, 11008 FFN: both divisible by 2, 4, 8, so tp shards add up to the model
    assert tp * _linear_macs(shard) == _linear_macs(full)
    assert shard.parameters == full.parameters          # the model's count, not the shard's
    assert shard.devices == tp


def test_two_allreduces_per_block_of_tokens_x_d():
    tp, batch, seq = 4, 2, 64
    w = build("gpt2-medium", phase="prefill", batch=batch, seq=seq, tp=tp)
    ars = [o for o in w.ops() if isinstance(o, AllReduce)]
    # one after attention, one after the FFN, in each of 24 blocks; one after the
    # vocabulary-parallel embedding
    assert len(ars) == 2 * 24 + 1
    assert all(o.elements == batch * seq * 1024 and o.devices == tp for o in ars)


def test_gqa_kv_heads_replicate_beyond_their_count():
    # llama2-70b: 64 query heads, 8 KV heads; tp 16 -> 4 query heads, 1 (replicated) KV head
    w = build("llama2-70b", phase="decode", context=16, tp=16)
    qk = next(o for o in w.ops() if getattr(o, "role", "") == "qk")
    assert qk.batch == 4 and qk.b_shared == 4
    qkv = next(o for o in w.ops() if getattr(o, "role", "") == "qkv")
    assert qkv.n == (4 + 2 * 1) * 128


def test_training_has_the_conjugate_allreduces():
    w = build("gpt2-small", phase="train", seq=64, tp=2)
    fwd = [o for o in w.ops() if isinstance(o, AllReduce) and o.pass_ == "fwd"]
    bwd = [o for o in w.ops() if isinstance(o, AllReduce) and o.pass_ == "bwd_data"]
    assert len(fwd) == len(bwd) == 2 * 12 + 1


def test_bad_degrees_are_errors_that_name_tp():
    with pytest.raises(WorkloadError) as e:
        build("llama2-70b", phase="decode", tp=3)
    assert "tp" in str(e.value) and "valid: 1, 2, 4, 8" in str(e.value)
    with pytest.raises(WorkloadError) as e:
        build("resnet50", tp=2)
    assert "transformers" in str(e.value)


def test_result_counts_every_device():
    acc = archsim.load("gpu/h100")
    one = archsim.evaluate(acc, archsim.workload("llama2-7b", phase="decode", context=128))
    two = archsim.evaluate(acc, archsim.workload("llama2-7b", phase="decode", context=128,
                                                 tp=2))
    assert two.area_mm2 == pytest.approx(2 * one.area_mm2)
    assert two.extra["devices"] == 2
    # memory-bound decode: half the weights per device, plus two all-reduces per layer
    assert 0.5 * one.latency_s < two.latency_s < one.latency_s
    assert two.extra["memory"]["resident_bytes"] < 0.51 * one.extra["memory"]["resident_bytes"]
