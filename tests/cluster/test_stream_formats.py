"""Issue 26 item 4 (rest): collectives move the residual stream in its format, at least
16-bit (vLLM's fp8 linear layers write bf16 outputs, which it all-reduces), and the context-
parallel K/V exchange moves the KV-cache format; the one-level collective a device's own
link prices (``link_collective``) is the cluster's one-node collective."""

from __future__ import annotations

import pytest

from archsim.api import device_build, load
from archsim.arch.cluster import single_node
from archsim.arch.collective import collective, link_collective, place
from archsim.workloads.parallel import ParallelPlan, layer_comms
from archsim.workloads.zoo import transformer_shape

LLAMA = transformer_shape("llama3-70b")


@pytest.fixture(scope="module")
def h100():
    return load("gpu/h100")


@pytest.mark.parametrize(("a_format", "bytes_per_element"), [
    (None, 2), ("fp8_e4m3", 2), ("int8", 2), ("bf16", 2), ("fp32", 4)])
def test_tp_allreduce_bytes_follow_the_stream_format(h100, a_format, bytes_per_element):
    # 2 sequences x 1024 tokens x d_model 8192 per all-reduce, in >= 16-bit elements
    b = device_build(h100, a_format=a_format, w_format=a_format)
    cs = layer_comms(LLAMA, ParallelPlan(tp=8), "prefill", 2, 1024, False, b)
    assert cs and all(c.payload_bytes() == 2 * 1024 * 8192 * bytes_per_element for c in cs)


def test_cp_kv_exchange_moves_the_kv_format(h100):
    # cp 4, 8192 tokens: each device's 2048 tokens x 2 (K, V) x 8 KV heads x 128, gathered
    # from 4 devices: 2 bytes per element in bf16, 1 with an fp8 KV cache
    block = 2048 * 2 * 8 * 128
    for kv, bpe in ((None, 2), ("fp8_e4m3", 1)):
        b = device_build(h100, kv_format=kv)
        (c,) = [c for c in layer_comms(LLAMA, ParallelPlan(cp=4), "prefill", 1, 8192, False, b)
                if c.group == "cp"]
        assert c.payload_bytes() == 4 * block * bpe


@pytest.mark.parametrize("impl", ["nccl", "custom-graph", "custom-eager", "auto"])
@pytest.mark.parametrize("nbytes", [4096.0, 2.0**20, 2.0**28])
def test_link_collective_is_the_one_node_collective(h100, impl, nbytes):
    c = single_node(h100, 8)
    whole = collective(c, "allreduce", nbytes, place(c, 8, 1), impl=impl)
    one = link_collective(c.spec.scale_up, "allreduce", 8, nbytes, impl=impl)
    assert (one.time_s, one.algorithm, one.protocol) == (whole.time_s, whole.algorithm,
                                                         whole.protocol)
    if impl == "auto":
        t = [collective(c, "allreduce", nbytes, place(c, 8, 1), impl=i).time_s
             for i in ("nccl", "custom-graph")]
        assert whole.time_s == min(t)
