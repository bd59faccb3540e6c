"""Integer factorisation helpers of the mapping and plan searches."""

from __future__ import annotations

import math

__all__ = ["divisors"]


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` (>= 1) in ascending order, by trial division up to sqrt(n):
    O(sqrt(n)), so a 1e11-element dimension (a fuzzed CLI call) costs milliseconds, not the
    hours of a scan to n."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]
