"""Overlap inside one device in serving (issue 31 item 2): each iteration's blocks scheduled
as mapper.overlap does; identities, directions and refusals on a tensor-parallel replica."""

from __future__ import annotations

import pytest

from archsim.api import load
from archsim.mapper.overlap import parse_overlap
from archsim.serve.cost import Batch, IterationCost
from archsim.serve.session import run_serving
from archsim.workloads.errors import ConfigError

NVLS: list[str] = []     # configs/gpu/h100.yaml nvlink.nvls: true (HGX NVSwitch, NVLS)


@pytest.fixture(scope="module")
def h100():
    return load("h100", NVLS)


def _cost(acc, overlap: str, tp: int = 8) -> IterationCost:
    return IterationCost(acc, "llama3-8b", tp, overlap=parse_overlap(overlap))


PREFILL = Batch(chunks=[(4096, 0)], decodes=0, decode_keys=0, emit=1)
DECODE = Batch(chunks=[], decodes=16, decode_keys=16 * 1025, emit=16)


def test_one_nano_batch_is_bit_for_bit_no_overlap(h100):
    a, b = _cost(h100, "none"), _cost(h100, "nanobatch:1")
    for batch in (PREFILL, DECODE):
        assert a.cost(batch) == b.cost(batch)


def test_energy_is_the_same_work(h100):
    a, b = _cost(h100, "none"), _cost(h100, "tokensplit")
    assert a.cost(PREFILL).energy_j == b.cost(PREFILL).energy_j


def test_directions(h100):
    none = _cost(h100, "none")
    split = _cost(h100, "tokensplit")
    fused = _cost(h100, "fused-ar-norm")
    # a 4096-token prefill chunk of Llama-3-70B (TokenWeave's model): compute-bound GEMMs
    # hide one half's all-reduce. (Llama-3-8B at TP8 does not gain: with the NVLS all-reduce
    # of gpu/h100 its all-reduce is too small a share to pay for two smaller GEMMs and the
    # SMs communication takes.)
    def big(o: str) -> IterationCost:
        return IterationCost(h100, "llama3-70b", 8, overlap=parse_overlap(o))
    assert big("tokensplit").cost(PREFILL).time_s < big("none").cost(PREFILL).time_s
    # a 16-sequence decode: every GEMM reads its weights, two halves read them twice
    assert split.cost(DECODE).time_s > none.cost(DECODE).time_s
    # the fused kernel removes the norm and residual passes in both
    for batch in (PREFILL, DECODE):
        assert fused.cost(batch).time_s < none.cost(batch).time_s


def test_fewer_tokens_than_nano_batches_run_unsplit(h100):
    one = Batch(chunks=[], decodes=1, decode_keys=1025, emit=1)
    assert _cost(h100, "nanobatch:4").cost(one).time_s == \
        pytest.approx(_cost(h100, "none").cost(one).time_s, rel=1e-12)


@pytest.mark.parametrize("design,overlap,tp,what", [
    ("a100", "fused-ar-norm", 8, "NVLink SHARP"),        # A100's NVSwitch does not reduce
    ("h100", "tokensplit", 1, "no tensor-parallel all-reduce"),
    ("h100", "fused-ar-norm", 1, "no tensor-parallel all-reduce")])
def test_refused_with_a_reason(design, overlap, tp, what):
    with pytest.raises(ConfigError, match=f"--overlap.*{what}"):
        _cost(load(design), overlap, tp)


def test_refused_for_pipeline_replicas(h100):
    with pytest.raises(ConfigError, match="--overlap.*pp 1, ep 1"):
        IterationCost(h100, "llama3-8b", 4, pp=2, overlap=parse_overlap("tokensplit"))


def test_run_serving_takes_the_switch():
    kw = dict(overrides=NVLS, tp=8, rate=2, duration=5, prompt="1024", output="16", seed=0)
    a = run_serving("h100", "llama3-8b", **kw).result
    b = run_serving("h100", "llama3-8b", overlap="fused-ar-norm", **kw).result
    assert b.ttft_s["p50"] < a.ttft_s["p50"]
    assert b.deployment["summary"].endswith("overlap fused-ar-norm")
    assert "overlap" not in a.deployment["summary"]


def test_nanoflow_check_admits_only_what_stays_resident():
    """The NanoFlow comparison (archsim/validation/cluster.py) admits at most the requests
    whose whole KV fits: LLaMA-2-70B at TP8 caches 80 layers x 2 (K, V) x 1 KV head x 128 x
    2 B = 40960 B per token and device; its weights are 68.98e9 params x 2 B / 8 = 17.25 GB
    per device (the HF checkpoint's count, docs/validation.md 'workloads'); an A100 80 GB at
    serve's 0.9: (72e9 - 17.25e9) / 40960 = 1.337M tokens -> 870 requests of 512 + 1024."""
    from archsim.validation.cluster import resident_requests

    a100 = load("gpu/a100")
    assert IterationCost(a100, "llama2-70b", 8).kv_bytes_per_token == 80 * 2 * 1 * 128 * 2
    expect = (0.9 * 80e9 - 68.98e9 * 2 / 8) / 40960 / 1536
    assert resident_requests(a100, "llama2-70b", 8, 1536) == int(expect) == 870
