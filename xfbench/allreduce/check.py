"""The result every size is checked against.

Rank r contributes r + 1 in every element, so the sum over n ranks is n(n+1)/2 in
every element of every rank's result. Whole numbers below 2**24 add up exactly in
fp32 in any order, so the check is exact (no tolerance) for any world size below
about 5,700 ranks: a difference of any size means a wrong reduction.
"""

from __future__ import annotations

import numpy as np

EXACT_BELOW = 2**24


def fill_value(rank: int) -> float:
    return float(rank + 1)


def expected_sum(n: int) -> float:
    total = n * (n + 1) // 2
    if total >= EXACT_BELOW:
        raise ValueError(f"{n} ranks: the expected sum {total} is not exact in fp32")
    return float(total)


def errors(values: np.ndarray, n: int) -> tuple[float, int]:
    """(max_abs_err, number of wrong elements) of one rank's result."""
    diff = np.abs(np.asarray(values, dtype=np.float64) - expected_sum(n))
    return (float(diff.max()) if diff.size else 0.0), int(np.count_nonzero(diff))


def verdict(max_abs_err: float, wrong: int) -> tuple[bool, str | None]:
    """(correct, reason when not) from the errors gathered over every rank."""
    if wrong == 0 and max_abs_err == 0.0:
        return True, None
    return False, f"wrong result: {wrong} elements differ from n(n+1)/2, by up to {max_abs_err:g}"
