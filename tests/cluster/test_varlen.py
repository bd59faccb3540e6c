"""Variable-length documents in training (archsim.varlen, docs/cluster.md "Variable-length
documents"): closed forms worked out here, the identity with today's causal attention, the
directions the mechanism predicts and the refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from archsim.api import device_build, load
from archsim.arch.cluster import single_node
from archsim.mapper.plan import pipeline_time
from archsim.parallel import PlanOptions, evaluate_plan
from archsim.plans import search_plans
from archsim.serve.requests import LengthDist
from archsim.varlen import (
    Varlen,
    doc_pairs,
    microbatch_factors,
    pack,
    parse_doc_lengths,
    pipeline_varlen,
    rank_pairs,
    stats,
)
from archsim.workloads.errors import ConfigError
from archsim.workloads.ops import Attention
from archsim.workloads.parallel import ParallelPlan

MODEL = "gpt2-small"     # a decoder with 1024 positions: quick to evaluate
SEQ = 1024


@pytest.fixture(scope="module")
def cluster():
    return single_node(load("h100"), 8)


@pytest.fixture(scope="module")
def memo():
    return {}


@pytest.mark.parametrize("length,window", [(1, 0), (7, 0), (1000, 0), (1000, 64), (50, 64)])
def test_doc_pairs_is_the_causal_attention_op(length, window):
    op = Attention(name="a", batch=1, heads=1, kv_heads=1, q_len=length, kv_len=length, head_dim=64,
                   causal=True, window=window)
    assert doc_pairs(length, window) == op.pairs()
    if window == 0:
        assert doc_pairs(length) == length * (length + 1) // 2


def test_rank_pairs_closed_forms():
    # one document of 16 tokens over 2 ranks; total 16*17/2 = 136
    # zigzag: chunks of 4, rank 0 holds rows 0-3 and 12-15: (1+2+3+4) + (13+14+15+16) = 68
    assert rank_pairs([16], 16, 2, "zigzag") == [68, 68]
    # contiguous: rank 0 rows 0-7: 36; rank 1 rows 8-15: 136 - 36 = 100
    assert rank_pairs([16], 16, 2, "contiguous") == [36, 100]
    assert rank_pairs([16], 16, 2, "per-document") == [68, 68]
    # documents 8 + 8 zig-zagged as one sequence: rank 0 holds rows 0-3 (doc 1: 10) and rows
    # 12-15 (doc 2 rows 4-7: 5+6+7+8 = 26) = 36; rank 1 rows 4-11: doc 1 rows 4-7 (26) + doc 2
    # rows 0-3 (10) = 36; per-document: each document's chunks 1+2, 3+4, 5+6, 7+8 -> 3 + 15
    # and 7 + 11 per rank and document: 18 x 2 = 36
    assert rank_pairs([8, 8], 16, 2, "zigzag") == [36, 36]
    assert rank_pairs([8, 8], 16, 2, "per-document") == [36, 36]
    # documents 12 + 4: the sequence's zigzag is unbalanced, per-document is not
    total = 12 * 13 // 2 + 4 * 5 // 2
    # zigzag: rank 0 rows 0-3 of doc 1 (1+2+3+4) and doc 2 (10); rank 1 rows 4-11 (5+...+12)
    assert rank_pairs([12, 4], 16, 2, "zigzag") == [20, 68]
    assert rank_pairs([12, 4], 16, 2, "per-document") == [total // 2, total // 2]


@pytest.mark.parametrize("sharding", ["zigzag", "contiguous", "per-document"])
def test_ranks_cover_every_pair_once(sharding):
    rng = np.random.default_rng(3)
    for _ in range(20):
        cuts = np.sort(rng.choice(np.arange(1, 96), size=5, replace=False))
        docs = [int(x) for x in np.diff([0, *cuts, 96])]
        for w in (0, 10):
            assert sum(rank_pairs(docs, 96, 4, sharding, w)) == sum(doc_pairs(d, w) for d in docs)


def test_one_full_document_zigzag_is_balanced_exactly():
    seq, cp = 8192, 4
    assert rank_pairs([seq], seq, cp, "zigzag") == [seq * (seq + 1) // 2 // cp] * cp
    a = microbatch_factors([(seq,)] * 4, 1, 2, seq, cp, "zigzag")
    assert (a == 1.0).all()


def test_packing_and_imbalance_of_a_known_list():
    v = Varlen((8, 4, 4, 2, 2, 2, 2, 8))
    packed = pack(v, 4, 8)
    assert packed == ((8,), (4, 4), (2, 2, 2, 2), (8,))          # first-fit, in order
    # pairs per sequence: 36, 2 x 10, 4 x 3, 36 of 4 x 36 full; one sequence per microbatch
    st, a = stats(packed, 1, 4, 8, 1, "zigzag", "fixed")
    assert a.tolist() == [[1.0, 20 / 36, 12 / 36, 1.0]]
    assert st.attention_fraction == pytest.approx(104 / 144, rel=1e-15)
    assert st.pp_imbalance == pytest.approx(36 / (104 / 4), rel=1e-15)     # 1.385
    assert st.padding == 0.0 and st.documents == 8
    # balanced: longest first into the least-loaded sequence with room
    assert pack(replace(v, packing="balanced"), 4, 8) == ((8,), (8,), (4, 2, 2), (4, 2, 2))
    # a document longer than the sequence is cut; once every sequence is open one that fits
    # nowhere is cut to fill the first with room, and the rest waits for the next step
    assert pack(Varlen((20,)), 3, 8) == ((8,), (8,), (4,))
    assert pack(Varlen((6, 6, 6, 6)), 2, 8) == ((6, 2), (6, 2))
    assert pack(Varlen((6, 6, 6, 6), "balanced"), 2, 8) == ((6, 2), (6, 2))
    full = pack(Varlen(LengthDist("lognormal", 300, 2.0), "balanced"), 16, 4096)
    assert [sum(d) for d in full] == [4096] * 16          # a distribution fills the step


def test_a_document_far_longer_than_the_step_costs_only_the_step(tmp_path):
    """A 10^12-token document (a file entry or a fixed length) fills the step with whole
    sequences: only the step's pieces are cut (it once cut every piece: 10^8 tokens took
    38 s and 6 GB)."""
    assert pack(Varlen((10**12, 5)), 4, 1024) == ((1024,),) * 4
    assert pack(Varlen(LengthDist("fixed", 10**12)), 3, 4096) == ((4096,),) * 3
    # the pieces of several documents, in order, up to the step: 3000 = 1024 + 1024 + 952
    assert pack(Varlen((3000, 10**12)), 4, 1024) == ((1024,), (1024,), (952, 72), (1024,))
    f = tmp_path / "docs.txt"
    f.write_text("1000000000000\n")
    assert pack(Varlen(parse_doc_lengths(str(f))), 2, 8) == ((8,), (8,))


def test_pipeline_of_unequal_microbatches():
    # equal microbatches: today's pipeline
    f, b = np.full(8, 0.3), np.full(8, 0.7)
    assert pipeline_varlen(f, b, 4, 2) == pytest.approx(pipeline_time(0.3, 0.7, 4, 8, 2))
    assert pipeline_varlen(f, 0 * b, 4) == pytest.approx(pipeline_time(0.3, 0.0, 4, 8))
    # two stages, jobs of 1 and 3: stage 1 [0,1] [1,4], stage 2 [1,2] [4,7] -> 7
    assert pipeline_varlen(np.array([1.0, 3.0]), np.zeros(2), 2) == 7.0


def _pair(cluster, memo, plan, v, batch=8, build=None):
    base = evaluate_plan(cluster, MODEL, plan, "train", batch, SEQ, memo=memo, build=build)
    r = evaluate_plan(cluster, MODEL, plan, "train", batch, SEQ,
                      options=PlanOptions(varlen=v), memo=memo, build=build)
    return base, r


@pytest.mark.parametrize("plan", [ParallelPlan(), ParallelPlan(pp=2, microbatches=4),
                                  ParallelPlan(cp=2, dp=2, microbatches=2, tp=2)])
def test_one_full_document_per_sequence_is_todays_step_bit_for_bit(cluster, memo, plan):
    base, r = _pair(cluster, memo, plan, Varlen((SEQ,) * 8))
    assert r.step_s == base.step_s
    assert r.attention_flops == base.attention_flops
    assert r.energy_j == base.energy_j
    assert r.varlen is not None and r.varlen.pp_imbalance == 1.0


def test_attention_flops_are_the_sum_of_document_terms(cluster, memo):
    docs = (100, 300, 624, 512, 512, 1024, 1, 1023) * 2
    base, r = _pair(cluster, memo, ParallelPlan(dp=2, microbatches=2), Varlen(docs))
    frac = sum(d * (d + 1) / 2 for d in docs) / (8 * SEQ * (SEQ + 1) / 2)
    assert r.varlen.attention_fraction == pytest.approx(frac, rel=1e-12)
    assert r.attention_flops == pytest.approx(base.attention_flops * frac, rel=1e-12)
    assert r.step_s < base.step_s                     # less attention work
    # step: the slower replica; sequences 0-3 hold 1+1+1+... vs the other replica's
    assert r.varlen.dp_imbalance >= 1.0


def test_pp_imbalance_sets_the_pipeline(cluster, memo):
    # microbatch 1: a full document; microbatch 2: tiny ones -> the ramp runs at the slow one
    docs = (SEQ, *([64] * 16))
    plan = ParallelPlan(pp=2, microbatches=2)
    base, r = _pair(cluster, memo, plan, Varlen(docs), batch=2)
    a = (1.0, 16 * doc_pairs(64) / doc_pairs(SEQ))
    assert r.varlen.pp_imbalance == pytest.approx(1 / ((a[0] + a[1]) / 2), rel=1e-12)
    # the bubble keeps the slowest microbatch's times: it equals the uniform bubble
    assert r.breakdown_s["bubble"] == pytest.approx(base.breakdown_s["bubble"], rel=1e-9)
    assert r.step_s < base.step_s


def test_per_document_cp_sharding_balances_ranks(cluster, memo):
    v = Varlen(parse_doc_lengths("lognormal:200:1.0"))
    plan = ParallelPlan(cp=4, dp=2, microbatches=1)
    steps = {}
    for sh in ("contiguous", "zigzag", "per-document"):
        _, r = _pair(cluster, memo, plan, replace(v, cp_sharding=sh))
        steps[sh] = (r.step_s, r.varlen.cp_imbalance)
    # per-document: balanced but for documents not a multiple of 2 cp tokens long
    assert steps["per-document"][1] < 1.05
    assert steps["per-document"][1] < min(steps["zigzag"][1], steps["contiguous"][1])
    assert steps["per-document"][0] <= min(steps["zigzag"][0], steps["contiguous"][0])


def test_dense_scores_do_not_change(cluster, memo):
    build = replace(device_build(cluster.device), attention="unfused")
    base, r = _pair(cluster, memo, ParallelPlan(), Varlen((100,) * 80), build=build)
    assert r.step_s == base.step_s and r.attention_flops == base.attention_flops


def test_refusals(cluster):
    v = Varlen((100,))
    with pytest.raises(ConfigError, match="--doc-lengths.*training"):
        evaluate_plan(cluster, MODEL, ParallelPlan(), "prefill", 1, SEQ,
                      options=PlanOptions(varlen=v))
    with pytest.raises(ConfigError, match="decoder"):
        evaluate_plan(cluster, "bert-base", ParallelPlan(), "train", 1, 128,
                      options=PlanOptions(varlen=v))
    with pytest.raises(ConfigError, match="--packing"):
        evaluate_plan(cluster, MODEL, ParallelPlan(), "train", 1, SEQ,
                      options=PlanOptions(varlen=replace(v, packing="best")))
    with pytest.raises(ConfigError, match="--doc-lengths.*training"):
        search_plans("h100", MODEL, 2, phase="decode", varlen=v)
    with pytest.raises(ConfigError, match="--doc-lengths"):
        parse_doc_lengths("lognormal:x")


def test_doc_lengths_file(tmp_path):
    f = tmp_path / "docs.txt"
    f.write_text("# lengths\n100, 200\n300\n")
    assert parse_doc_lengths(str(f)) == (100, 200, 300)
    f.write_text("100\n-3\n")
    with pytest.raises(ConfigError, match="docs.txt:2"):
        parse_doc_lengths(str(f))


@pytest.mark.parametrize("flags,msg", [
    (["--phase", "prefill", "--doc-lengths", "100"], "--doc-lengths"),
    (["--phase", "train", "--packing", "balanced"], "--packing"),
    (["--phase", "train", "--doc-lengths", "100", "--cp-sharding", "per-document"],
     "--cp-sharding"),
])
def test_cli_refusals_exit_2(flags, msg):
    p = subprocess.run([sys.executable, "-m", "archsim", "run", "h100", "--model", MODEL,
                        *flags], capture_output=True, text=True)
    assert p.returncode == 2
    assert msg in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("flags,msg", [
    (["--phase", "decode", "--doc-lengths", "100"], "--doc-lengths"),
    (["--doc-seed", "3"], "--doc-seed"),
    (["--doc-lengths", "uniform:5:1"], "--doc-lengths"),
])
def test_plan_cli_refusals_exit_2(flags, msg):
    p = subprocess.run([sys.executable, "-m", "archsim", "plan", "h100", "--model", MODEL,
                        "--devices", "2", *flags], capture_output=True, text=True)
    assert p.returncode == 2
    assert msg in p.stderr and "Traceback" not in p.stderr


def test_search_plans_takes_documents():
    v = Varlen(parse_doc_lengths("lognormal:200:1.0"), "balanced")
    found = search_plans("h100", MODEL, 2, batch=4, seq=SEQ, varlen=v)
    assert found.best is not None and found.best.varlen is not None
    assert "varlen" in found.to_dict(1)["plans"][0]


def test_cli_run_train_with_documents_json():
    p = subprocess.run([sys.executable, "-m", "archsim", "run", "h100", "--model", MODEL,
                        "--phase", "train", "--batch", "2", "--seq", str(SEQ), "--doc-lengths",
                        "lognormal:200:1.0", "--packing", "balanced", "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)["extra"]["plan"]
    assert row["varlen"]["packing"] == "balanced" and 0 < row["varlen"]["attention_fraction"] < 1


def test_balanced_sequences_are_dealt_over_replicas_and_microbatches():
    # sequences (8), (8), (4,2,2), (4,2,2) heaviest first in snake order over dp 2 x m 2:
    # groups 0..3 = (replica 0, mb 0), (replica 1, mb 0), (replica 0, mb 1), (replica 1, mb 1)
    v = Varlen((8, 4, 4, 2, 2, 2, 2, 8), "balanced")
    assert pack(v, 4, 8, dp=2, microbatches=2) == ((8,), (4, 2, 2), (8,), (4, 2, 2))
    st, a = stats(pack(v, 4, 8, 2, 2), 2, 2, 8, 1, "zigzag", "balanced")
    assert a.tolist() == [[1.0, 16 / 36], [1.0, 16 / 36]]       # replicas alike
