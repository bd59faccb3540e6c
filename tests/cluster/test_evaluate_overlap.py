"""Overlap inside one device as an option of ``archsim.evaluate`` (issue 31, the techniques'
gaps): the one-device graph's blocks scheduled by mapper.overlap (archsim/device_overlap.py);
the same result as ``archsim run DEVICE --overlap``; closed forms, directions, refusals."""

from __future__ import annotations

import json

import pytest

from archsim import evaluate, load, workload
from archsim.arch.cluster import single_node
from archsim.arch.collective import multimem_allreduce, place
from archsim.cli import main
from archsim.mapper.overlap import Overlap, blocks_makespan, makespan
from archsim.workloads.errors import ConfigError
from archsim.workloads.ops import AllReduce
from archsim.workloads.tags import FUSED_AR_NORM_ROLES


@pytest.fixture(scope="module")
def h100():
    return load("gpu/h100")


def _wl(phase: str = "prefill", batch: int = 4, tp: int = 2):
    kw = {"seq": 256} if phase != "decode" else {"context": 512}
    return workload("llama3-8b", phase=phase, batch=batch, tp=tp, attention="fused", **kw)


def test_none_and_one_nano_batch_are_the_plain_evaluation(h100):
    wl = _wl()
    plain = evaluate(h100, wl)
    for o in ("none", "nanobatch:1", Overlap()):
        r = evaluate(h100, wl, overlap=o)
        assert (r.latency_s, r.energy_j, r.input_hash) == \
            (plain.latency_s, plain.energy_j, plain.input_hash)


def test_fused_kernel_closed_form(h100):
    """No split: the blocks run serially, so the latency is the plain one minus every block's
    norm and residual ops and its all-reduces, plus each all-reduce at the multimem rate
    (arch.collective.multimem_allreduce on the device's own link, 2 devices)."""
    wl = _wl()
    plain = evaluate(h100, wl)
    ops = {o.name: o for o in wl.ops()}
    c = single_node(h100, 2)
    want = plain.latency_s
    for r in plain.ops:
        if r.block is None:
            continue
        if r.role in FUSED_AR_NORM_ROLES:
            want -= r.latency_s
        elif r.role == "collective":
            op = ops[r.name]
            assert isinstance(op, AllReduce)
            want += multimem_allreduce(c, op.payload_bytes(), place(c, 2, 1)).time_s \
                - r.latency_s
    got = evaluate(h100, wl, overlap="fused-ar-norm")
    assert got.latency_s == pytest.approx(want, rel=1e-12)
    assert got.latency_s < plain.latency_s            # direction: the fused kernel helps
    assert got.energy_j == plain.energy_j             # the same work
    assert got.extra["overlap"] == {"technique": "fused-ar-norm",
                                    "unoverlapped_latency_s": plain.latency_s}


def test_token_split_is_the_half_batch_schedule(h100):
    """Two halves: outside the blocks the whole batch once; each block the two-stream
    schedule of the half batch's chain, bounded below by the halves' compute with the SM
    tax (each half's compute once per half) and above by running them back to back."""
    wl = _wl()
    half = evaluate(h100, wl.split_batch(2))
    whole = evaluate(h100, wl)
    outside = sum(r.latency_s for r in whole.ops if r.block is None)
    chain = [("network" if r.role == "collective" else
              "compute" if r.bound == "compute" else "memory", r.latency_s)
             for r in half.ops if r.block == 0]
    blocks = 32
    one = makespan(chain, Overlap(2, streams=2), 132)
    serial = 2 * sum(t for _, t in chain)
    compute = 2 * sum(t for k, t in chain if k != "network")
    got = evaluate(h100, wl, overlap="tokensplit").latency_s
    assert outside + blocks * compute <= got <= outside + blocks * serial
    # exactly: every block alike, so the run of 32 blocks is mapper.overlap.blocks_makespan
    # of the half chain (its closed forms: tests/cluster/test_overlap.py)
    assert got == pytest.approx(outside + blocks_makespan(chain, Overlap(2, streams=2), 132,
                                                          blocks), rel=1e-12)
    assert compute <= one <= serial


def test_directions(h100):
    """Prefill at tp 8: both techniques shorten the step (the fused kernel most at small
    token counts); decode at batch 64 is weight-bound, so splitting it reads every weight
    twice and is slower (the papers' techniques target compute-bound batches)."""
    pre = workload("llama3-70b", phase="prefill", batch=8, seq=1024, tp=8, attention="fused")
    none = evaluate(h100, pre).latency_s
    for o in ("tokensplit", "fused-ar-norm", "tokensplit+fused-ar-norm", "nanobatch:2"):
        assert evaluate(h100, pre, overlap=o).latency_s < none
    dec = workload("llama3-70b", phase="decode", batch=64, context=1024, tp=8,
                   attention="fused")
    assert evaluate(h100, dec, overlap="nanobatch:2").latency_s > evaluate(h100, dec).latency_s


def test_the_cli_runs_the_same_evaluation(h100, capsys):
    """``archsim run DEVICE --overlap X`` (no other plan flag) is ``evaluate(..., overlap=X)``;
    ``--overlap none`` is the run without the flag."""
    args = ["run", "gpu/h100", "--model", "llama3-8b", "--phase", "prefill", "--batch", "4",
            "--seq", "256", "--tp", "2", "--json"]
    out = {}
    for o in (None, "none", "tokensplit+fused-ar-norm"):
        assert main(args + (["--overlap", o] if o else [])) == 0
        out[o] = json.loads(capsys.readouterr().out)
    api = evaluate(h100, _wl(), overlap="tokensplit+fused-ar-norm")
    assert out["tokensplit+fused-ar-norm"]["latency_s"] == api.latency_s
    assert out["tokensplit+fused-ar-norm"]["energy_j"] == api.energy_j
    assert out["none"]["latency_s"] == out[None]["latency_s"] == evaluate(h100, _wl()).latency_s
    assert out["tokensplit+fused-ar-norm"]["extra"]["provenance"]["argv"][-2:] == \
        ["--overlap", "tokensplit+fused-ar-norm"]


@pytest.mark.parametrize("design,wl_kw,overlap,what", [
    ("gpu/h100", {"phase": "train"}, "tokensplit", "inference ones"),
    ("gpu/h100", {"tp": 1}, "tokensplit", "no tensor-parallel all-reduce"),
    ("gpu/h100", {"batch": 4}, "nanobatch:3", "does not split into 3"),
    ("gpu/a100", {}, "fused-ar-norm", "NVLink SHARP"),
    ("hetero/nvdla_shidiannao", {"tp": 1}, "nanobatch:2", "2 units"),
])
def test_refused_naming_the_flag(design, wl_kw, overlap, what):
    kw = {"phase": "prefill", "batch": 4, "tp": 2} | wl_kw
    wl = workload("gpt2-small" if design.startswith("hetero") else "llama3-8b",
                  seq=128, **kw)
    with pytest.raises(ConfigError, match=f"--overlap.*{what}"):
        evaluate(load(design), wl, overlap=overlap)
    with pytest.raises(ConfigError, match="--overlap.*no transformer blocks"):
        evaluate(load("gpu/h100"), workload("resnet18", batch=2), overlap="nanobatch:2")
