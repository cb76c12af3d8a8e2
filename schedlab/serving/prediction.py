r"""Output-length predictions, the only view of a request's future a policy gets, and the
estimates a KV-aware policy plans with.

Predictions
-----------
A run's predictions come from a *prediction model*, spelt as for
:func:`schedlab.predictions.predict` (``perfect``, ``interval:ALPHA[:SEED]``,
``buckets[:SEED]``, ``lognormal:CV[:SEED]``): each request gets an interval
:math:`[\ell_i, u_i]` and a point :math:`\hat o_i` inside it. The scenario's older
``prediction_cv`` :math:`v` is the model ``lognormal:v`` (``perfect`` for 0): the true
length times a lognormal error of mean 1,

.. math::

    \hat o = \ell = u = \max\bigl(1, \operatorname{round}(o X)\bigr), \qquad
    \ln X \sim \mathcal N(-\sigma^2/2, \sigma^2), \quad \sigma^2 = \ln(1 + v^2).

Predictions are drawn from their own random stream of the scenario's seed, so a run's
arrivals, lengths and iteration noise do not change with the model (common random numbers
across a robustness study).

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

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from schedlab.errors import ServingError

__all__ = [
    "ESTIMATES",
    "MAX_PREDICTION_CV",
    "Estimate",
    "Predictions",
    "check_spec",
    "predict_outputs",
    "prediction_spec",
    "refined_output",
]

#: The largest coefficient of variation accepted for the prediction error.
MAX_PREDICTION_CV = 10.0

#: What a KV-aware policy plans a request's output with (module docstring).
Estimate = Literal["point", "a-min", "a-max"]

#: The estimates, in the order policies list them.
ESTIMATES: tuple[Estimate, ...] = ("point", "a-min", "a-max")

#: Tags the predictions' random stream apart from the workload's and the noise's.
_STREAM = 0x707265


@dataclass(frozen=True)
class Predictions:
    """Per request, the predicted interval and point the requests of a run carry.

    Attributes
    ----------
    spec
        The prediction model that drew them.
    lower, upper, point
        :math:`\\ell \\le \\hat o \\le u`, each ``>= 1``, one per request.
    """

    spec: str
    lower: np.ndarray
    upper: np.ndarray
    point: np.ndarray


def prediction_spec(predictions: str | None, cv: float) -> str:
    """The prediction model of a scenario: ``predictions`` if given, else ``lognormal:cv``
    for a positive ``cv`` (the older option), else ``perfect``.

    Raises
    ------
    ServingError
        If both are given, or ``cv`` is not in ``[0, MAX_PREDICTION_CV]``.
    """
    if isinstance(cv, bool) or not (isinstance(cv, int | float) and 0 <= cv <= MAX_PREDICTION_CV):
        raise ServingError(
            f"prediction_cv: must be a number from 0 to {MAX_PREDICTION_CV:g}, got {cv!r}"
        )
    if predictions is None:
        return f"lognormal:{cv:g}" if cv > 0 else "perfect"
    if cv > 0:
        raise ServingError(
            f"predictions: give {predictions!r} or prediction_cv {cv:g}, not both "
            "(prediction_cv v is the model lognormal:v)"
        )
    return predictions


def predict_outputs(spec: str, output: np.ndarray, seed: int) -> Predictions:
    """The predictions of model ``spec`` for the true lengths ``output`` (module docstring).

    Raises
    ------
    ServingError
        Naming ``predictions``, for a spec that names no model or has bad parameters.
    """
    true = np.asarray(output, dtype=np.int64)
    name, _, arg = spec.partition(":")
    if spec == "perfect":
        return Predictions(spec, true.copy(), true.copy(), true.copy())
    if name == "lognormal":
        try:
            cv = float(arg)
        except ValueError:
            raise ServingError(f"predictions: {spec!r}: expected lognormal:CV") from None
        if not 0 <= cv <= MAX_PREDICTION_CV:
            raise ServingError(
                f"predictions: {spec!r}: CV must be from 0 to {MAX_PREDICTION_CV:g}"
            )
        point = true.copy()
        if cv > 0:
            sigma = math.sqrt(math.log1p(cv * cv))
            rng = np.random.default_rng([_STREAM, seed])
            factor = rng.lognormal(-sigma * sigma / 2, sigma, true.size)
            point = np.maximum(1, np.rint(true * factor)).astype(np.int64)
        return Predictions(spec, point, point.copy(), point.copy())
    raise ServingError(f"predictions: unknown model {spec!r}; known: perfect, lognormal:CV")


def check_spec(spec: str, where: str) -> str:
    """``spec`` if it names a prediction model with good parameters.

    Raises
    ------
    ServingError
        Naming ``where`` (e.g. ``--predictions``), for any other.
    """
    try:
        predict_outputs(spec, np.ones(1, dtype=np.int64), 0)
    except ServingError as error:
        raise ServingError(f"{where}: {str(error).partition(': ')[2]}") from None
    return spec


def refined_output(base: int, generated: int) -> int:
    """The output length planned for a request that has emitted ``generated`` tokens and
    not finished, starting from the estimate ``base``: :math:`\\max(b, g + 1)` (module
    docstring)."""
    return max(base, generated + 1)
