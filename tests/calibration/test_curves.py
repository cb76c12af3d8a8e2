"""MonotoneCurve: isotonic fit, linear tail, exact sums, JSON round trip."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.calibration.curves import MonotoneCurve
from schedlab.errors import FormatError


def test_isotonic_fit_pools_a_violation_and_interpolates():
    # 1, 3, 2, 4 -> pool adjacent violators gives 1, 2.5, 2.5, 4 (the L2 projection).
    curve = MonotoneCurve.fit([1, 2, 3, 4], [1, 3, 2, 4], tail_from=0.0)
    assert curve.y == pytest.approx((1, 2.5, 2.5, 4))
    assert curve(1.5) == pytest.approx(1.75)
    assert curve(0) == pytest.approx(1)  # flat below the first size


def test_tail_is_nnls_slope_of_the_upper_points():
    # Exactly linear upper half t = 2 + 3x: the tail continues with slope 3.
    x = np.arange(1, 11)
    curve = MonotoneCurve.fit(x, 2 + 3 * x, tail_from=0.5)
    assert curve.tail_slope == pytest.approx(3)
    assert curve(20) == pytest.approx(2 + 3 * 20)
    # A decreasing tail gets slope 0, never negative.
    assert MonotoneCurve.fit(x, 10 - 0.1 * x).tail_slope == 0


def test_combine_is_exact_on_the_union_grid():
    a = MonotoneCurve((1, 3), (1, 3), 1.0)
    b = MonotoneCurve((2, 4), (0, 2), 0.5)
    total = MonotoneCurve.combine([(2.0, a), (1.0, b)])
    for v in (0.5, 1, 2, 2.5, 3, 3.5, 4, 10):
        assert total(v) == pytest.approx(2 * a(v) + b(v))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1e4, allow_nan=False), min_size=2, max_size=30),
    st.lists(st.floats(0, 1e5, allow_nan=False), min_size=6, max_size=6),
)
def test_fitted_curves_are_non_decreasing(values, probes):
    x = np.arange(1, len(values) + 1, dtype=float)
    curve = MonotoneCurve.fit(x, values)
    points = sorted(probes)
    at = [curve(p) for p in points]
    assert all(b >= a - 1e-9 for a, b in pairwise(at))
    assert min(at) >= 0


def test_round_trip_and_validation():
    curve = MonotoneCurve((1, 2), (3, 4), 0.25)
    assert MonotoneCurve.from_dict(curve.to_dict(), "c") == curve
    with pytest.raises(FormatError, match="c:"):
        MonotoneCurve.from_dict({"x": [1, 2], "y": [4, 3]}, "c")
    with pytest.raises(FormatError, match="c:"):
        MonotoneCurve.from_dict({"x": [1]}, "c")
    with pytest.raises(ValueError, match="finite"):
        MonotoneCurve((1, 2), (1, float("nan")))
