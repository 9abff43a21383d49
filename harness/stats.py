"""Summary statistics of evaluations: standard errors, paired differences, win-rate intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["binomial_se", "paired", "standard_error", "wilson_interval"]

#: The normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


def standard_error(x: Sequence[float] | np.ndarray) -> float:
    """Standard error of the mean of `x` `[N]`: sample sd (ddof 1) / sqrt(N); 0 for N < 2."""
    x = np.asarray(x, np.float64).ravel()
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0


def paired(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Mean and standard error of the per-item difference a - b (`[N]` each, item i of both
    played on the same seed / game): the SE of a paired comparison."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired needs equal shapes, got {a.shape} and {b.shape}")
    d = a - b
    return float(d.mean()), standard_error(d)


def binomial_se(successes: float, n: int) -> float:
    """Standard error of a rate p = successes / n: sqrt(p (1 - p) / n); 0 for n = 0.

    `successes` may count draws as halves (a score rate).
    """
    if n <= 0:
        return 0.0
    p = successes / n
    return math.sqrt(max(p * (1.0 - p), 0.0) / n)


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a rate successes / n (95% by default); (0, 1) for n = 0.

    Unlike p +- z SE it stays inside [0, 1] and is not empty at p = 0 or 1 (a 100-0 match).
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(max(p * (1 - p), 0.0) / n + z2n / (4 * n))
    return max(0.0, centre - half), min(1.0, centre + half)
