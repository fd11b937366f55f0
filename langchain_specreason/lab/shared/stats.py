"""Statistics of a benchmark session: intervals a reviewer accepts. Pure Python, seeded.

* :func:`wilson` — 95% interval of an accuracy (k right of n);
* :func:`paired_ratio` — mean latency of mode A over mode B on the same problems, with a paired
  bootstrap 95% interval (problems resampled together, so host drift cancels);
* :func:`mcnemar` — exact two-sided p of the paired accuracy difference (discordant pairs).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n`` (``(0, 1)`` when ``n`` is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Ratio:
    """``mean(a) / mean(b)`` over paired problems, with its bootstrap interval."""

    ratio: float
    low: float
    high: float
    n: int

    @property
    def faster(self) -> bool:
        """B is slower than A with 95% confidence (``b / a`` interval above 1)."""
        return self.low > 1.0


def paired_ratio(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0
) -> Ratio:
    """``sum(b) / sum(a)``: how many times faster A is than B, paired bootstrap 95% interval.

    ``a[i]`` and ``b[i]`` are the latencies of one problem under the two modes.
    """
    if len(a) != len(b) or not a:
        raise ValueError("paired_ratio needs two non-empty lists of the same length")
    n = len(a)
    point = math.fsum(b) / math.fsum(a)
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        sa = math.fsum(a[i] for i in idx)
        draws.append(math.fsum(b[i] for i in idx) / sa if sa else math.inf)
    low, high = percentile_95(draws)
    return Ratio(point, low, high, n)


def percentile_95(draws: Sequence[float]) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of bootstrap draws (the interval's ends)."""
    ordered = sorted(draws)
    last = len(ordered) - 1
    return ordered[int(0.025 * last)], ordered[math.ceil(0.975 * last)]


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int, float]:
    """``(a right and b wrong, a wrong and b right, exact two-sided p)`` over paired problems."""
    if len(a) != len(b):
        raise ValueError("mcnemar needs paired lists of the same length")
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    n = only_a + only_b
    if n == 0:
        return 0, 0, 1.0
    k = min(only_a, only_b)
    tail = math.fsum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return only_a, only_b, min(1.0, 2 * tail)
