r"""Monotone piecewise-linear curves fitted to one-dimensional op measurements.

An op's time against its size (tokens in the batch, or sequences producing logits) is
fitted in two parts:

* **inside the measured range** :math:`[x_1, x_m]`: the isotonic (non-decreasing)
  least-squares fit of the measurements (scipy's ``isotonic_regression``, pool adjacent
  violators), interpolated linearly between the measured sizes. More work never takes
  less time, so isotonic regression removes measurement noise without a shape
  assumption; it is the L2 projection of the data onto non-decreasing sequences.
* **beyond it** (:math:`x > x_m`): the last fitted value plus a slope
  :math:`b \ge 0` from a non-negative least-squares fit of :math:`t \approx a + b x`
  to the measurements in the upper part of the range (``x >= tail_from * x_m``) —
  compute-bound GEMMs and element-wise ops grow linearly in the token count there.
  Below :math:`x_1` the curve is flat at its first value.

The curve is continuous, non-negative and non-decreasing by construction (isotonic values
plus a non-negative slope). Sums of such curves with non-negative weights are again such
curves (:meth:`MonotoneCurve.combine`), which is how an iteration's dense part is
composed from its ops.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from schedlab.errors import FormatError
from schedlab.json_files import json_number, json_numbers

__all__ = ["MonotoneCurve"]


@dataclass(frozen=True)
class MonotoneCurve:
    """A non-decreasing piecewise-linear function with a linear tail.

    Attributes
    ----------
    x
        Breakpoints, strictly increasing.
    y
        Values at the breakpoints, non-decreasing and ``>= 0``.
    tail_slope
        Slope ``>= 0`` beyond the last breakpoint.
    """

    x: tuple[float, ...]
    y: tuple[float, ...]
    tail_slope: float = 0.0

    def __post_init__(self) -> None:
        if len(self.x) != len(self.y) or not self.x:
            raise ValueError("MonotoneCurve: x and y must be non-empty and of equal length")
        if not all(np.isfinite((*self.x, *self.y, self.tail_slope))):
            raise ValueError("MonotoneCurve: x, y and tail_slope must be finite")
        if any(b <= a for a, b in pairwise(self.x)):
            raise ValueError("MonotoneCurve: x must be strictly increasing")
        if self.y[0] < 0 or any(b < a for a, b in pairwise(self.y)):
            raise ValueError("MonotoneCurve: y must be non-negative and non-decreasing")
        if not self.tail_slope >= 0:
            raise ValueError("MonotoneCurve: tail_slope must be >= 0")

    @classmethod
    def fit(
        cls,
        x: Sequence[float] | np.ndarray,
        y: Sequence[float] | np.ndarray,
        *,
        tail_from: float = 0.5,
    ) -> MonotoneCurve:
        """Isotonic fit of ``y`` against ``x`` plus an NNLS tail slope (module docstring).

        Parameters
        ----------
        x, y
            Measurements; ``x`` strictly increasing.
        tail_from
            The tail slope is fitted on the points with ``x >= tail_from * max(x)``.
        """
        from scipy.optimize import isotonic_regression, nnls

        xs = np.asarray(x, dtype=float)
        ys = np.asarray(y, dtype=float)
        fitted = np.maximum(isotonic_regression(ys, increasing=True).x, 0.0)
        upper = xs >= tail_from * xs[-1]
        slope = 0.0
        if upper.sum() >= 2:
            design = np.column_stack([np.ones(upper.sum()), xs[upper]])
            slope = float(nnls(design, ys[upper])[0][1])
        return cls(tuple(xs.tolist()), tuple(fitted.tolist()), slope)

    def __call__(self, value: float) -> float:
        """The curve at ``value`` (linear interpolation; flat below, linear tail above)."""
        x, y = self.x, self.y
        if value >= x[-1]:
            return y[-1] + self.tail_slope * (value - x[-1])
        if value <= x[0]:
            return y[0]
        i = bisect_right(x, value)
        x0, x1 = x[i - 1], x[i]
        return y[i - 1] + (y[i] - y[i - 1]) * (value - x0) / (x1 - x0)

    @classmethod
    def combine(cls, parts: Sequence[tuple[float, MonotoneCurve]]) -> MonotoneCurve:
        """The curve :math:`\\sum_k w_k f_k` for weights ``w_k >= 0`` (exact).

        A sum of piecewise-linear functions is piecewise linear on the union of their
        breakpoints; beyond the largest breakpoint the parts with shorter ranges are
        already on their tails, so the sum continues with the sum of the tail slopes.
        """
        if not parts or any(w < 0 for w, _ in parts):
            raise ValueError("MonotoneCurve.combine: needs parts with weights >= 0")
        grid = sorted({v for _, curve in parts for v in curve.x})
        values = [sum(w * curve(v) for w, curve in parts) for v in grid]
        values = np.maximum.accumulate(np.asarray(values)).tolist()  # guard rounding only
        return cls(tuple(grid), tuple(values), sum(w * c.tail_slope for w, c in parts))

    def to_dict(self) -> dict[str, Any]:
        return {"x": list(self.x), "y": list(self.y), "tail_slope": self.tail_slope}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> MonotoneCurve:
        """Validate and build from :meth:`to_dict`'s form; errors name ``where`` and the
        key (``{where}.x[3]``), every value a finite number
        (:func:`~schedlab.json_files.json_number`)."""
        if not isinstance(data, Mapping):
            raise FormatError(f"{where}: expected an object with x, y, tail_slope")
        try:
            x, y = (json_numbers(data[key], f"{where}.{key}") for key in ("x", "y"))
            return cls(x, y, json_number(data.get("tail_slope", 0.0), f"{where}.tail_slope"))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, FormatError):  # names its place already
                raise
            raise FormatError(f"{where}: {exc}") from None
