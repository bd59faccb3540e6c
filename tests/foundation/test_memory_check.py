"""Off-chip memory capacity check: resident bytes of a workload against the design."""

from __future__ import annotations

import subprocess
import sys

import pytest

import archsim
from archsim.api import memory_check


def test_decode_resident_bytes_is_weights_plus_kv_cache():
    # GPT-2 small, fp16: 124.44 M parameters x 2 B (the tied LM head stored once) plus the
    # KV cache, 12 layers x (K, V) x (128 + 1) tokens x 768 x 2 B = 4.76 MB. Biases and the
    # largest op's activations (< 0.2 MB here) are below the 1% tolerance.
    wl = archsim.workload("gpt2-small", phase="decode", batch=1, context=128)
    expected = 124_439_808 * 2 + 12 * 2 * 129 * 768 * 2
    assert wl.resident_bytes() == pytest.approx(expected, rel=0.01)


def test_kv_cache_grows_linearly_with_context_and_batch():
    # one more token of context adds, per sequence, 2 (K, V) x layers x d x 2 B
    a = archsim.workload("llama2-7b", phase="decode", batch=4, context=1000).resident_bytes()
    b = archsim.workload("llama2-7b", phase="decode", batch=4, context=2000).resident_bytes()
    assert b - a == pytest.approx(4 * 1000 * 2 * 32 * 4096 * 2, rel=1e-3)


def test_training_keeps_optimiser_state_and_activations():
    inf = archsim.workload("resnet18", phase="inference", batch=8).resident_bytes()
    train = archsim.workload("resnet18", phase="train", batch=8).resident_bytes()
    # momentum SGD reads fp32 parameter, gradient and momentum: >= 3 x 4 B per parameter
    assert train - inf >= 3 * 4 * 11_689_512


def test_llama2_70b_does_not_fit_one_a100():
    # 69 B parameters x 2 B = 138 GB > 80 GB of HBM
    res = archsim.evaluate(archsim.load("gpu/a100"),
                           archsim.workload("llama2-70b", phase="decode", context=16))
    mem = res.extra["memory"]
    assert mem["capacity_bytes"] == 80e9 and not mem["fits"]
    assert mem["resident_bytes"] > 2 * 68e9


def test_units_sharing_one_memory_share_its_capacity():
    # nvdla_shidiannao: two sub-accelerators on one 4 GB LPDDR4 (shared, no copies)
    mem = memory_check(archsim.load("hetero/nvdla_shidiannao"), archsim.workload("resnet18"))
    assert mem is not None and mem["capacity_bytes"] == 4e9 and mem["fits"]


def test_cli_warns_on_stderr_and_still_reports():
    p = subprocess.run([sys.executable, "-m", "archsim", "run", "gpu/a100", "--model",
                        "llama2-70b", "--phase", "decode", "--context", "16", "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 0
    assert "warning:" in p.stderr and "80 GB" in p.stderr
    assert '"fits": false' in p.stdout
