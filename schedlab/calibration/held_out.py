r"""Held-out error of a calibration: relative-error statistics and the skew term's test.

Every term of the calibrated cost model earns its place on profile rows it was not fitted
on (``docs/calibration.md``). :class:`ErrorStats` summarises relative errors
:math:`|\hat t - t| / t` in percent. :func:`skew_cross_validation` tests the decode-skew
correction (:mod:`schedlab.calibration.skew`) on the profiler's skewed-batch measurements
(``skew.csv``) by :math:`k`-fold cross-validation: the rows are dealt into ``folds`` folds
by a seeded permutation, and each row is predicted by tables fitted on the other folds, as

* ``none``: :math:`t_{mean}`, every decode taken at the mean length (no correction);
* ``pooled``: :math:`t_{mean} + \alpha (t_{max} - t_{mean})` with one :math:`\alpha` for
  every batch;
* ``bucket``: the same with the per-bucket :math:`\alpha` (the pooled one where a bucket
  has no training row).

The endpoints :math:`t_{mean}` and :math:`t_{max}` are the row's measured ones, so the test
isolates :math:`\alpha`. :func:`chosen_skew` picks the variant of least held-out mean error,
``none`` on a tie: a correction is kept only where it improves held-out error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from schedlab.calibration.profiles import SkewSamples
from schedlab.calibration.skew import SkewTable

__all__ = ["SKEW_VARIANTS", "ErrorStats", "chosen_skew", "skew_cross_validation"]

#: Held-out mean errors (percent) that differ by less than this are a tie.
TIE_PCT = 1e-6

#: The skew variants tested, simplest first.
SKEW_VARIANTS = ("none", "pooled", "bucket")


@dataclass(frozen=True)
class ErrorStats:
    """Relative errors of a held-out set, in percent."""

    n: int
    mape_pct: float
    median_pct: float
    p90_pct: float
    worst_pct: float

    @classmethod
    def of(cls, predicted: np.ndarray, measured: np.ndarray) -> ErrorStats:
        if measured.size == 0:
            return cls(0, math.nan, math.nan, math.nan, math.nan)
        rel = np.abs(predicted - measured) / measured * 100.0
        return cls(
            int(rel.size),
            float(rel.mean()),
            float(np.median(rel)),
            float(np.percentile(rel, 90)),
            float(rel.max()),
        )


def skew_variant(table: SkewTable, variant: str) -> SkewTable | None:
    """``table`` as the named variant (``None`` for ``none``)."""
    if variant == "none":
        return None
    if variant == "pooled":
        return SkewTable(table.default, {}, table.axes)
    if variant == "bucket":
        return table
    raise ValueError(f"skew variant: one of {', '.join(SKEW_VARIANTS)}, got {variant!r}")


def predict_skewed_us(table: SkewTable | None, samples: SkewSamples) -> np.ndarray:
    """The predicted time of every row (``None``: no correction, :math:`t_{mean}`)."""
    return samples.t_mean_us.copy() if table is None else table.predict_us(samples)


def skew_cross_validation(
    samples: SkewSamples,
    axes: Mapping[str, Any] | None = None,
    *,
    folds: int = 5,
    seed: int = 0,
) -> dict[str, ErrorStats]:
    """Held-out error of each of :data:`SKEW_VARIANTS` (module docstring)."""
    if folds < 2 or len(samples) < folds:
        raise ValueError(f"skew cross-validation: needs folds >= 2 and >= {folds} rows")
    fold = np.random.default_rng(seed).permutation(len(samples)) % folds
    predicted = {variant: np.empty(len(samples)) for variant in SKEW_VARIANTS}
    for k in range(folds):
        test = fold == k
        table = SkewTable.fit(samples.subset(~test), axes)
        held = samples.subset(test)
        for variant in SKEW_VARIANTS:
            predicted[variant][test] = predict_skewed_us(skew_variant(table, variant), held)
    return {
        variant: ErrorStats.of(values, samples.t_skew_us) for variant, values in predicted.items()
    }


def chosen_skew(errors: Mapping[str, ErrorStats]) -> str:
    """The variant of least held-out mean error, the simplest on a tie (errors equal to
    :data:`TIE_PCT`, below which they are rounding)."""
    return min(
        SKEW_VARIANTS,
        key=lambda v: (round(errors[v].mape_pct / TIE_PCT), SKEW_VARIANTS.index(v)),
    )
