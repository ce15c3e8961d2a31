"""How sure a median is: a distribution-free confidence interval, and how many rounds a
target width needs.

The interval is the order-statistic one: for n independent rounds, the median lies
between the k-th smallest and the k-th largest round with probability
1 - 2 P(Binomial(n, 1/2) < k), whatever the distribution of the rounds (no normality,
which step times, skewed by the occasional slow step, do not have). The largest k whose
coverage is at least the level asked for is used; with fewer than 6 rounds even
[min, max] covers less than 95 % (3 rounds: 75 %), and the coverage reached is recorded
beside the interval rather than rounded up.
"""

from __future__ import annotations

import math
import statistics

LEVEL = 0.95
METHOD = "order statistics (distribution-free), coverage as recorded"
# Default target for adaptive rounds: the interval's half-width, as a share of the median.
TARGET = 0.02


def _below(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) < k)."""
    return sum(math.comb(n, i) for i in range(k)) / 2**n


def median_ci(samples, level: float = LEVEL) -> tuple[float, float, float]:
    """(low, high, coverage) of the median of samples: the widest-k order statistics
    interval whose coverage is at least level, else [min, max] and its coverage."""
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        raise ValueError("no samples")
    if n == 1:
        return xs[0], xs[0], 0.0
    best = 1
    for k in range(1, n // 2 + 1):
        if 1 - 2 * _below(n, k) >= level:
            best = k
        else:
            break
    return xs[best - 1], xs[n - best], 1 - 2 * _below(n, best)


def half_width(samples, level: float = LEVEL) -> float:
    """The interval's half-width as a share of the median."""
    low, high, _ = median_ci(samples, level)
    median = statistics.median(samples)
    return (high - low) / 2 / median if median > 0 else math.inf


def rounds_for(pilot, target: float = TARGET) -> int | None:
    """Rounds whose 95 % interval of the median should be at most target (a share of the
    median) wide on each side, from pilot rounds' spread (None with fewer than 2). For
    large n the interval is about 1.96 x 1.2533 sigma / sqrt(n) on each side (the
    median's standard error is 1.2533 sigma / sqrt(n)); sigma is estimated robustly from
    the pilots' median absolute deviation (x 1.4826)."""
    if len(pilot) < 2:
        return None
    median = statistics.median(pilot)
    mad = statistics.median(abs(x - median) for x in pilot) * 1.4826
    if median <= 0:
        return None
    sigma = max(mad, (max(pilot) - min(pilot)) / 4) / median  # 2 pilots: MAD is the range/2
    return max(6, math.ceil((1.96 * 1.2533 * sigma / target) ** 2))


def ratio_ci(a: tuple[float, float, float], b: tuple[float, float, float]):
    """How many times longer a takes than b, each given as (median, low, high): the
    ratio of medians and a conservative interval [low_a / high_b, high_a / low_b] (both
    intervals at their own coverage). The ratio is "within noise" when that interval
    contains 1."""
    (ma, la, ha), (mb, lb, hb) = a, b
    ratio = ma / mb
    low, high = la / hb, ha / lb
    return ratio, low, high, low <= 1 <= high
