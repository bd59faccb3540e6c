"""Iteration times against a measured profile, with a constant fitted on one part and
checked on another (split by tensor-parallel degree, never at random).

Reference: DistServe's fitted OPT-13B iteration times on A100-80G (ms), from measurements of
its engine: prefill ``a + b T + c sum(l^2)``, decode (batch < 95) ``a + b sum(ctx) + c B``.
Source: LLMServe/DistServe, simdistserve/estimators/profile_data/
profiler-a100-80g.distserve.json (coefficients copied below).
"""

from __future__ import annotations

import pytest

import archsim
from archsim.serve.cost import Batch, IterationCost

PROFILE = {1: ((16.456860431694288, 0.09264750660897617, 6.474785740229194e-06),
               (19.934702624895458, 0.0006269356524350583, 0.03850697740828398)),
           2: ((13.402703359246601, 0.06234291581603636, 2.226884309113053e-06),
               (13.294796350285385, 0.00034109219700723494, 0.06296393225243659))}
LENS = (512, 1024, 2048)
BATCHES = (8, 32, 64)
CTX = 512


def _points(acc, tp: int) -> list[tuple[float, float]]:
    """(our iteration time s, DistServe's measured-fit time s) per shape."""
    (pa, pb, pc), (da, db, dc) = PROFILE[tp]
    # DistServe's engine runs fused (FlashAttention-style) attention kernels
    c = IterationCost(acc, "opt-13b", tp, attention="fused")
    pts = [(c.cost(Batch([(n, 0)], 0, 0, 1)).time_s, (pa + pb * n + pc * n * n) * 1e-3)
           for n in LENS]
    pts += [(c.cost(Batch([], b, b * (CTX + 1), b)).time_s, (da + db * b * CTX + dc * b) * 1e-3)
            for b in BATCHES]
    return pts


def _fit(pts: list[tuple[float, float]]) -> float:
    # overhead x minimising sum(((o + x) / m - 1)^2): x = sum((m - o) / m^2) / sum(1 / m^2)
    return sum((m - o) / m ** 2 for o, m in pts) / sum(1 / m ** 2 for _, m in pts)


@pytest.mark.slow
def test_engine_overhead_fitted_on_tp1_predicts_tp2():
    acc = archsim.load("gpu/a100")
    # hardware model alone: never slower than the real engine (it has no software overhead)
    tp1 = _points(acc, 1)
    assert all(o <= m for o, m in tp1)
    x = _fit(tp1)
    assert 0.002 < x < 0.02          # a per-iteration engine overhead of a few ms
    for o, m in _points(acc, 2):     # held-out tensor-parallel degree
        assert (o + x) / m == pytest.approx(1.0, abs=0.25), (o, m)
