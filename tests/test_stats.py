"""The median's confidence interval, adaptive rounds, and comparisons that say "within noise"."""

from __future__ import annotations

import math

import pytest

from xfbench.harness.presets import PRESETS
from xfbench.harness.stats import half_width, median_ci, ratio_ci, rounds_for


def test_order_statistic_interval_and_its_exact_coverage():
    # 3 rounds: [min, max] covers the median with 1 - 2/8 = 75 %, never called 95 %.
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0, 0.75)
    # 10 rounds: the 2nd smallest to the 2nd largest, coverage 1 - 2 * 11/1024.
    low, high, cov = median_ci(list(range(10)))
    assert (low, high) == (1, 8) and cov == pytest.approx(1 - 22 / 1024)
    # 100 rounds: coverage at least 95 %, and the interval brackets the median.
    low, high, cov = median_ci(list(range(100)))
    assert cov >= 0.95 and low < 49.5 < high


def test_rounds_for_a_target_grow_with_the_spread():
    assert rounds_for([1.0]) is None  # one pilot has no spread
    quiet, noisy = rounds_for([1.0, 1.01, 0.99]), rounds_for([1.0, 1.2, 0.8])
    assert 6 <= quiet < noisy
    # Rounds as many as asked give about the target half-width on normal-ish data.
    import random

    rng = random.Random(0)
    n = rounds_for([1.0, 1.05, 0.95], target=0.02)
    data = [rng.gauss(1.0, 0.05 * 1.4826 * 0.6745) for _ in range(n)]
    assert half_width(data) < 0.04


def test_adaptive_rounds_stop_at_the_time_cap_and_say_why():
    paper = PRESETS["paper"]
    assert paper.rounds(1.0, [1.0, 1.001]) == (10, "budget")  # quiet: the budget's 10
    rounds, why = paper.rounds(1.0, [1.0, 1.5, 0.6])  # noisy: more, up to 60 s
    assert why in ("ci target", "time cap") and 10 < rounds <= 60
    assert PRESETS["table7"].rounds(5.0, [5.0, 9.0]) == (3, "budget")  # fixed: not adaptive


def test_a_ratio_is_within_noise_when_its_interval_contains_one():
    ratio, low, high, noise = ratio_ci((1.0, 0.95, 1.05), (1.02, 0.97, 1.07))
    assert noise and low < 1 < high and ratio == pytest.approx(1 / 1.02)
    ratio, low, high, noise = ratio_ci((2.0, 1.9, 2.1), (1.0, 0.95, 1.05))
    assert not noise and low == pytest.approx(1.9 / 1.05) and high == pytest.approx(2.1 / 0.95)
    assert math.isclose(ratio, 2.0)
