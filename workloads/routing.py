"""Mixture-of-experts routing: how many tokens each expert of one device receives.

A routing is ``balanced`` or ``power_law:ALPHA`` (:func:`parse_routing`):

* ``balanced``: every expert receives ``tokens x top_k / experts`` tokens (round-robin
  assignment; with fewer (token, expert) pairs than experts, ``tokens x top_k`` distinct
  experts receive one each, spread evenly over the devices).
* ``power_law:ALPHA``: per-expert loads follow a bounded power law ``p(x) ~ x^-ALPHA`` (the
  skew of trained routers; ALPHA near 1 is heavy-tailed), scaled to ``tokens x top_k`` pairs:
  on ``[1, 0.8 tokens]`` when there are more pairs than experts, else on ``[0.01, 2]``
  (the pairs then land on nearly distinct experts). The loads are the distribution's
  quantiles at ``(i + 1/2) / experts`` (expected order statistics), rounded by largest
  remainders (the pairs left after the floors go to the largest fractional parts), no
  expert above ``tokens`` (a token's top-k experts are distinct). With expert parallelism the experts sit
  in contiguous groups of ``experts / ep`` in a random order; the device that bounds the
  step is the busiest group: :func:`device_loads` draws :data:`ROUTING_TRIALS` fixed-seed
  placements and returns the busiest group of the median draw (deterministic).

This is the routing protocol of ``shared/reference/kernels_h100/moe.csv.gz`` (its
``distribution`` column: balanced, power_law_1.01, power_law_1.2), written from its
description, not fitted to it.
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

from archsim.workloads.errors import Problem, WorkloadError

__all__ = ["parse_routing", "device_loads", "ROUTING_TRIALS"]

#: placements of the experts over the devices drawn to find the busiest device
ROUTING_TRIALS = 15
_SEED = 12345


def parse_routing(text: str, where: str = "--moe-routing") -> float:
    """The power-law exponent of a routing (0.0 = ``balanced``).

    Raises:
        WorkloadError: anything but ``balanced`` or ``power_law:ALPHA`` with ALPHA > 0,
            ALPHA != 1 (naming ``where``).
    """
    if text == "balanced":
        return 0.0
    head, _, tail = text.partition(":")
    try:
        alpha = float(tail) if head == "power_law" else -1.0
    except ValueError:
        alpha = -1.0
    if not math.isfinite(alpha) or alpha <= 0 or alpha == 1.0:
        raise WorkloadError(Problem(f"expected 'balanced' or 'power_law:ALPHA' with ALPHA > 0 "
                                    f"and != 1 (e.g. power_law:1.2), got {text!r}", where))
    return alpha


def _power_law_loads(tokens: int, experts: int, top_k: int, alpha: float) -> list[int]:
    pairs = tokens * top_k
    lo, hi = (1.0, 0.8 * tokens) if pairs > experts else (0.01, 2.0)
    a = 1.0 - alpha
    xs = [((hi ** a - lo ** a) * ((i + 0.5) / experts) + lo ** a) ** (1.0 / a)
          for i in range(experts)]
    total = sum(xs)
    # largest remainders (Hamilton): each expert gets the floor of its share, the pairs left
    # go to the largest fractional parts, never above `tokens` (a token's top-k experts are
    # distinct); with fewer pairs than experts most shares are below one, so the pairs land
    # on distinct experts instead of piling onto the busiest
    share = [x / total * pairs for x in xs]
    loads = [min(tokens, math.floor(v)) for v in share]
    order = sorted(range(experts), key=lambda i: (loads[i] - share[i], i))
    left = pairs - sum(loads)
    while left > 0:
        for i in order:
            if left and loads[i] < tokens:
                loads[i] += 1
                left -= 1
    loads.sort(reverse=True)
    return loads


@lru_cache(maxsize=4096)
def device_loads(tokens: int, experts: int, top_k: int, ep: int, alpha: float
                 ) -> tuple[float, ...]:
    """Tokens received by each expert of the busiest of ``ep`` devices that hold
    ``experts / ep`` experts each (zero-load experts left out), for ``tokens`` tokens routed
    to ``top_k`` experts each; ``alpha`` 0 = balanced (module doc)."""
    local = experts // ep
    if alpha == 0.0:
        per = tokens * top_k / experts
        if per >= 1.0:
            return (per,) * local
        return (1.0,) * min(local, math.ceil(tokens * top_k / ep))
    loads = _power_law_loads(tokens, experts, top_k, alpha)
    if ep == 1:
        return tuple(float(x) for x in loads if x > 0)
    rng = random.Random(_SEED)
    busiest = []
    for _ in range(ROUTING_TRIALS):
        order = loads[:]
        rng.shuffle(order)
        groups = [order[g * local:(g + 1) * local] for g in range(ep)]
        busiest.append(max(groups, key=sum))
    busiest.sort(key=sum)
    mid = busiest[len(busiest) // 2]
    return tuple(float(x) for x in sorted(mid, reverse=True) if x > 0)
