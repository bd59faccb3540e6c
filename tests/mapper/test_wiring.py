"""The mapper's search wired into evaluation (--mapping search / archsim map)."""

from __future__ import annotations

import math

import archsim
from archsim.arch import load_data
from archsim.cli import main
from archsim.dataflow.mapping import Shape, cost, feasible
from archsim.mapper.gemm_search import best_mapping
from archsim.workloads.ops import Conv2d, Gemm
from tests.conftest import spatial_config


def test_mapped_estimate_matches_mapper_cost_and_roofline():
    acc = load_data(spatial_config(rows=8, cols=8, bandwidth_gbps=2.0, glb_kib=64))
    u = acc.units[0]
    for op in (Gemm(name="g", m=64, n=48, k=96),
               Conv2d(name="c", n=1, c=16, h=14, w=14, k=32, r=3, s=3, padding=1)):
        r = best_mapping(u, op, "latency")
        assert r is not None
        shape = Shape.of(op)
        assert feasible(r.mapping, shape, u.arch_params(op)) == []
        est = u.estimate(op, r.mapping)
        assert est.cycles == math.ceil(cost(r.mapping, shape, u.arch_params(op)).cycles - 1e-6)
        assert est.cycles >= math.floor(u.roofline_cycles(op))
        # the search is at least as good as the configured dataflow's fold model
        assert est.cycles <= u.estimate(op, None).cycles


def test_evaluate_with_search_and_map_command(capsys):
    wl = archsim.workload("resnet18", a_format="int8", w_format="int8")
    acc = archsim.load("eyeriss_like")
    searched = archsim.evaluate(acc, wl, mapping="search")
    default = archsim.evaluate(acc, wl)
    assert searched.latency_s <= default.latency_s
    assert searched.input_hash != default.input_hash
    assert main(["map", "eyeriss_like", "--model", "resnet18", "--a-format", "int8",
                 "--w-format", "int8"]) == 0
    out = capsys.readouterr().out
    assert "DRAM[" in out and "rows[" in out
