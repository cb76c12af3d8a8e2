r"""Output-length predictions, the only view of a request's future a policy gets, and the
estimates a KV-aware policy plans with.

Predictions
-----------
A run's predictions come from a *prediction model* of :mod:`schedlab.predictions`
(``perfect``, ``interval:ALPHA[:SEED]``, ``buckets[:SEED]``, ``lognormal:CV[:SEED]``,
drawn by :func:`schedlab.predictions.predict` with the scenario's seed): each request
gets an interval :math:`[\ell_i, u_i]` and a point :math:`\hat o_i` inside it
(:meth:`~schedlab.predictions.Intervals.point`). The scenario's older ``prediction_cv``
:math:`v` is the model ``lognormal:v`` (``perfect`` for 0), the same draws: the true
length times a lognormal error of mean 1,
:math:`\hat o = \ell = u = \max(1, \operatorname{round}(o X))`. Each model draws from
its own random stream of the seed, so a run's arrivals, lengths and iteration noise do
not change with the model (common random numbers across a robustness study).

Estimates
---------
A KV-aware policy (``sloweave-kv`` and its variants, :mod:`schedlab.serving.policies`)
plans each admitted request's KV with an *estimate* of its output length, one of
:data:`ESTIMATES`:

* ``point``: the point prediction :math:`\hat o` (``sloweave-kv``);
* ``a-min``: the interval's lower end :math:`\ell` (``sloweave-kv-amin``), as Chen, Ye and
  Zhou's :math:`\mathcal A_{\min}` starts (arXiv 2508.14544);
* ``a-max``: its upper end :math:`u` (``sloweave-kv-amax``), as their
  :math:`\mathcal A_{\max}` plans.

Whichever the start, the estimate is *refined* as tokens are generated
(:func:`refined_output`): a request that has emitted :math:`g` tokens and not finished has
a true length of at least :math:`g + 1`, so it is planned at

.. math::

    \tilde o(g) = \max(b, g + 1),

:math:`b` being the start. This is the tightest bound the scheduler knows; a request
evicted and restarted keeps its generated tokens (vLLM recomputes them as prompt), so it
restarts with the same refined estimate. ``docs/design.md`` ("Planning with predicted
intervals") compares this with the paper's update rule.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from schedlab.errors import ServingError
from schedlab.predictions import MAX_CV, Intervals, predict

__all__ = [
    "ESTIMATES",
    "Estimate",
    "check_spec",
    "predict_outputs",
    "prediction_spec",
    "refined_output",
]

#: What a KV-aware policy plans a request's output with (module docstring).
Estimate = Literal["point", "a-min", "a-max"]

#: The estimates, in the order policies list them.
ESTIMATES: tuple[Estimate, ...] = ("point", "a-min", "a-max")


def prediction_spec(predictions: str | None, cv: float) -> str:
    """The prediction model of a scenario: ``predictions`` if given, else ``lognormal:cv``
    for a positive ``cv`` (the older option), else ``perfect``.

    Raises
    ------
    ServingError
        If both are given, or ``cv`` is not in ``[0, MAX_CV]``.
    """
    if isinstance(cv, bool) or not (isinstance(cv, int | float) and 0 <= cv <= MAX_CV):
        raise ServingError(f"prediction_cv: must be a number from 0 to {MAX_CV:g}, got {cv!r}")
    if predictions is None:
        return f"lognormal:{cv:g}" if cv > 0 else "perfect"
    if cv > 0:
        raise ServingError(
            f"predictions: give {predictions!r} or prediction_cv {cv:g}, not both "
            "(prediction_cv v is the model lognormal:v)"
        )
    return predictions


def predict_outputs(spec: str, output: np.ndarray, seed: int) -> Intervals:
    """The predictions of model ``spec`` for the true lengths ``output``, drawn with
    ``seed`` unless the spec names its own (:func:`schedlab.predictions.predict`).

    Raises
    ------
    PredictionError
        Naming ``predictions``, for a spec that names no model or has bad parameters.
    """
    return predict(spec, output, seed, where="predictions")


def check_spec(spec: str, where: str) -> str:
    """``spec`` if it names a prediction model with good parameters.

    Raises
    ------
    PredictionError
        Naming ``where`` (e.g. ``--predictions``), for any other.
    """
    predict(spec, np.ones(1, dtype=np.int64), 0, where=where)
    return spec


def refined_output(base: int, generated: int) -> int:
    """The output length planned for a request that has emitted ``generated`` tokens and
    not finished, starting from the estimate ``base``: :math:`\\max(b, g + 1)` (module
    docstring)."""
    return max(base, generated + 1)
