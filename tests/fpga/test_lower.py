"""Cycle fidelity: the estimate agrees with the event-driven simulation of the lowering."""

from __future__ import annotations

import pytest

import archsim
from archsim.workloads.ops import Conv2d, Elementwise, Gemm, Softmax, Sparsity

OPS = [
    Gemm(name="g", m=1024, n=768, k=768),                                    # compute bound
    Gemm(name="g", m=1024, n=768, k=768, w_sparsity=Sparsity(2, 8)),
    Gemm(name="g.bwd_data", m=256, n=768, k=3072, pass_="bwd_data",           # + pre-generation
         w_sparsity=Sparsity(2, 8)),
    Gemm(name="g", m=8, n=4096, k=4096),                                      # weight streaming
    Conv2d(name="c", n=4, c=64, h=28, w=28, k=128, r=3, s=3, padding=1,
           w_sparsity=Sparsity(1, 4)),
    Softmax(name="s", rows=4096, cols=128),
    Elementwise(name="e", rows=1, cols=1 << 20, fn="sgd", inputs=3),          # memory bound
]


@pytest.mark.parametrize("over", [[], ["units[0].memory.bandwidth_gbps=5"],
                                  ["units[0].pregen.overlap=false"]])
def test_estimate_matches_simulation(over) -> None:
    """Bandwidth memory: within 2 %: the simulation pays one chunk of pipeline fill and
    drain (at most 1/256 of the op per side) and where compute and DRAM time are close
    their interleaving; the estimate takes max(compute, memory) + the first tile."""
    u = archsim.load("sat_vcu1525", over).units[0]
    for op in OPS:
        est, sim = u.estimate(op).cycles, u.simulate(op)
        assert sim == pytest.approx(est, rel=0.02), op.name
        assert sim >= u.roofline_cycles(op) - 1e-6


def test_command_level_ddr4() -> None:
    """memory.model: dram runs 4 DDR4-2400 channels through sim.dram. A compute-bound op
    agrees within 1 %; a streaming op is faster than the estimate because sequential
    streaming reaches more than the configured 0.8 efficiency in the DRAM model (a finding,
    not tuned: the estimate keeps the config's efficiency), so only the direction and a 25 %
    bound are asserted."""
    u = archsim.load("sat_vcu1525", ["units[0].memory.model=dram",
                                     "units[0].memory.preset=DDR4-2400"]).units[0]
    op = Gemm(name="g", m=1024, n=768, k=768, w_sparsity=Sparsity(2, 8))
    assert u.simulate(op) == pytest.approx(u.estimate(op).cycles, rel=0.01)
    ew = Elementwise(name="e", rows=1, cols=1 << 18, fn="sgd", inputs=3)
    est, sim = u.estimate(ew).cycles, u.simulate(ew)
    assert 0.75 * est <= sim <= est


def test_cycle_fidelity_end_to_end() -> None:
    acc = archsim.load("sat_vcu1525")
    wl = archsim.workload("resnet18", phase="train", batch=1).with_sparsity(2, 8)
    a = archsim.evaluate(acc, wl)
    c = archsim.evaluate(acc, wl, fidelity="cycle")
    assert c.latency_s == pytest.approx(a.latency_s, rel=0.02)
