"""Sliding-window layers keep only their window's KV blocks (``serve.kv.KVLayout``, vLLM's
hybrid KV cache manager): the pool's pages, a request's pages and the capacity it buys,
worked out here from gpt-oss-20b's published config (24 blocks alternating a 128-token
sliding window and full attention; 8 KV heads of 64) and the block arithmetic.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

import archsim
from archsim.cli import main
from archsim.serve import PoolSpec, SchedulerSpec, ServeSetup, serve
from archsim.serve.kv import KVLayout, kv_layout
from archsim.serve.requests import Request
from archsim.workloads.errors import WorkloadError

GPT_OSS_20B = "tests/data/hf_deployed/gpt-oss-20b"
BS = 16
WIN_BLOCKS = 128 // BS + 1          # blocks 128 consecutive tokens can touch: 9


def test_layout_groups_the_layers_by_span():
    # one span: one group of every layer, a page is a block
    assert kv_layout({0: 32}) == KVLayout()
    # gpt-oss: 12 + 12 -> a group of 12, one full and one sliding group, half-block pages
    assert kv_layout({0: 12, 128: 12}) == KVLayout(1, ((128, 1),), 0.5)
    # Gemma-3-like 1 full : 5 sliding (8 + 40): groups of 8, 1 + 5 of them
    assert kv_layout({0: 8, 1024: 40}) == KVLayout(1, ((1024, 5),), 8 / 48)
    # every layer windowed (Mistral-7B-v0.1): one capped group
    assert kv_layout({4096: 32}) == KVLayout(0, ((4096, 1),), 1.0)


@pytest.mark.parametrize("blocks", [1, 8, 9, 10, 64, 257])
def test_pages_of_a_request(blocks):
    lay = kv_layout({0: 12, 128: 12})
    # prompt being written: both groups hold every block
    assert lay.pages(blocks, BS, False) == 2 * blocks
    # decoding: the sliding group holds at most the 9 blocks a 128-token window touches
    assert lay.pages(blocks, BS, True) == blocks + min(blocks, WIN_BLOCKS)
    # a cached prefix's blocks are the prefix's, not the request's
    assert lay.pages(blocks, BS, True, shared=blocks) == 0
    # no windows: pages are blocks, as before
    assert KVLayout().pages(blocks, BS, True, shared=1) == blocks - 1


def _run(kv_manager: str, requests, concurrency=None):
    raw: dict = {}
    h100 = archsim.load("gpu/h100")
    setup = ServeSetup(GPT_OSS_20B, pool=PoolSpec(scheduler=SchedulerSpec(
        kv_manager=kv_manager)), memory_fraction=0.9)
    res = serve(h100, setup, requests, raw_out=raw, concurrency=concurrency)
    return res, raw["sim"].replicas[0]


def test_pool_has_twice_the_pages_of_half_the_size():
    _, hyb = _run("hybrid", [Request(0, 0.0, 100, 2)])
    _, uni = _run("uniform", [Request(0, 0.0, 100, 2)])
    # a page holds one group (half the layers): the same free bytes give twice as many
    assert hyb.kv.total in (2 * uni.kv.total, 2 * uni.kv.total + 1)
    assert hyb.swap_bytes_per_block == pytest.approx(uni.swap_bytes_per_block / 2)


def test_a_long_request_keeps_the_window_on_the_sliding_layers():
    # prompt 2000 (125 blocks), output 300: while the prompt is written both groups hold
    # every block (250 pages); decoding trims the sliding group to 9 blocks and the full
    # group grows to ceil(2299 / 16) = 144 blocks: at most 153 pages after the prefill.
    p, o = 2000, 300
    _, hyb = _run("hybrid", [Request(0, 0.0, p, o)])
    _, uni = _run("uniform", [Request(0, 0.0, p, o)])
    assert uni.kv.peak == -(-(p + o - 1) // BS)                      # 144 whole blocks
    assert hyb.kv.peak == 2 * -(-p // BS)                            # 250 half-blocks
    assert hyb.kv.used == 0 and uni.kv.used == 0                     # all released
    # the last decode held 144 + 9 pages = 76.5 blocks' bytes, against 144
    assert hyb.layout.pages(-(-(p + o - 1) // BS), BS, True) == 144 + WIN_BLOCKS


def test_hybrid_serves_more_requests_at_once_when_kv_binds():
    # Closed loop, 96 clients, prompt 1024 and 1024 output tokens, a KV cache cut small
    # (memory fraction 0.25). At the end every request holds ceil(2047 / 16) = 128 blocks:
    # uniform 96 x 128 = 12288 blocks, more than its pool, so it must preempt; hybrid
    # 96 x (128 + 9) half-size pages = 13152, within its pool of twice as many pages, so
    # it never preempts and that is its peak (all 96 decode together at the end).
    reqs = [Request(i, 0.0, 1024, 1024) for i in range(96)]
    h100 = archsim.load("gpu/h100")
    out = {}
    for m in ("hybrid", "uniform"):
        raw: dict = {}
        setup = ServeSetup(GPT_OSS_20B, pool=PoolSpec(scheduler=SchedulerSpec(kv_manager=m)),
                           memory_fraction=0.25)
        res = serve(h100, setup, reqs, raw_out=raw, concurrency=96)
        out[m] = (res, raw["sim"].replicas[0])
    (rh, h), (ru, u) = out["hybrid"], out["uniform"]
    blocks = -(-2047 // BS)
    assert u.kv.total < 96 * blocks and u.preemptions > 0
    assert 96 * (blocks + WIN_BLOCKS) <= h.kv.total
    assert h.kv.peak == 96 * (blocks + WIN_BLOCKS) and h.preemptions == 0
    assert rh.span_s < ru.span_s


def test_one_span_models_are_unchanged_by_the_manager():
    # llama3-8b has one attention span: hybrid = uniform, bit for bit
    h100 = archsim.load("gpu/h100")
    reqs = [Request(i, 0.01 * i, 700, 200) for i in range(40)]
    res = [serve(h100, ServeSetup("llama3-8b", pool=PoolSpec(scheduler=SchedulerSpec(
        kv_manager=m)), memory_fraction=0.3), reqs) for m in ("hybrid", "uniform")]
    assert res[0] == res[1]


def test_unknown_manager_names_the_flag(capsys):
    with pytest.raises(WorkloadError) as e:
        _run("paged", [Request(0, 0.0, 10, 2)])
    assert e.value.problems[0].path == "--kv-manager"
    with pytest.raises(SystemExit) as ex:      # argparse's choices exit 2 themselves
        main(["serve", "gpu/h100", "--model", "llama3-8b", "--kv-manager", "x"])
    assert ex.value.code == 2
    assert "--kv-manager" in capsys.readouterr().err


def test_replace_keeps_the_spec_frozen():
    s = SchedulerSpec()
    assert s.kv_manager == "hybrid" and replace(s, kv_manager="uniform").kv_manager == "uniform"


def test_uniform_on_a_one_span_model_is_said(capsys):
    # the flag cannot change a one-span model: said on stderr, not dropped silently
    assert main(["serve", "gpu/h100", "--model", "llama3-8b", "--concurrency", "2", "--isl",
                 "64", "--osl", "8", "--requests", "4", "--kv-manager", "uniform"]) == 0
    assert "--kv-manager uniform" in capsys.readouterr().err
