"""`harness.stats`: standard error, paired difference, binomial SE and Wilson interval by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rtplan.harness import binomial_se, paired, standard_error, wilson_interval
from rtplan.harness.stats import Z95


def test_standard_error_by_hand():
    # [1, 2, 3, 6]: mean 3, squared deviations 4 + 1 + 0 + 9 = 14, var 14/3, SE sqrt(14/3)/2.
    assert standard_error([1.0, 2.0, 3.0, 6.0]) == pytest.approx(math.sqrt(14 / 3) / 2)
    assert standard_error(np.array([[1.0, 3.0]])) == pytest.approx(1.0)  # sd sqrt(2), / sqrt 2
    assert standard_error([5.0]) == standard_error([]) == 0.0


def test_paired_difference_by_hand():
    mean, se = paired([3.0, 5.0, 4.0], np.array([1.0, 4.0, 4.0]))
    # differences 2, 1, 0: mean 1, sd 1, SE 1/sqrt(3)
    assert mean == pytest.approx(1.0) and se == pytest.approx(1 / math.sqrt(3))
    # The same differences but unpaired spreads: the paired SE ignores the shared per-seed part.
    assert paired([10.0, 1.0], [9.0, 0.0]) == (1.0, 0.0)
    with pytest.raises(ValueError, match="equal shapes"):
        paired([1.0, 2.0], [1.0])


def test_binomial_se_by_hand():
    assert binomial_se(5, 10) == pytest.approx(math.sqrt(0.25 / 10))
    assert binomial_se(3, 4) == pytest.approx(math.sqrt(0.75 * 0.25 / 4))
    assert binomial_se(2.5, 4) == pytest.approx(math.sqrt(0.625 * 0.375 / 4))  # draws as halves
    assert binomial_se(0, 8) == binomial_se(8, 8) == binomial_se(0, 0) == 0.0


def test_wilson_interval_by_hand():
    # 8 of 10 at 95%: centre (0.8 + z^2/20) / (1 + z^2/10), half-width
    # z sqrt(0.016 + z^2/400) / (1 + z^2/10) -> (0.4902, 0.9433), the textbook values.
    lo, hi = wilson_interval(8, 10)
    assert (lo, hi) == (pytest.approx(0.49016, abs=1e-5), pytest.approx(0.94332, abs=1e-5))
    # 0 of 10: the interval starts at 0 and reaches (z^2/10) / (1 + z^2/10), not an empty one.
    z2 = Z95**2
    assert wilson_interval(0, 10) == (0.0, pytest.approx((z2 / 10) / (1 + z2 / 10)))
    lo, hi = wilson_interval(10, 10)
    assert hi == pytest.approx(1.0) and lo == pytest.approx(1 / (1 + z2 / 10))
    assert wilson_interval(0, 0) == (0.0, 1.0)
    # z = 1: a narrower interval around the same centre.
    lo1, hi1 = wilson_interval(8, 10, z=1.0)
    assert 0.49016 < lo1 < 0.8 < hi1 < 0.94332
