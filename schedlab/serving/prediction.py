r"""Output-length predictions, the only view of a request's future a policy gets.

A KV-aware policy (``sloweave-kv``, :mod:`schedlab.serving.policies`) plans with each
request's predicted output length :math:`\hat o`. Predictions are either exact
(:math:`\hat o = o`, coefficient of variation 0) or the true length times a lognormal error
of mean 1 and a given coefficient of variation :math:`v`,

.. math::

    \hat o = \max\bigl(1, \operatorname{round}(o X)\bigr), \qquad
    \ln X \sim \mathcal N(-\sigma^2/2, \sigma^2), \quad \sigma^2 = \ln(1 + v^2),

drawn from their own random stream of the scenario's seed, so a run's arrivals, lengths
and iteration noise do not change with :math:`v` (common random numbers across a
robustness study).
"""

from __future__ import annotations

import math

import numpy as np

from schedlab.errors import ServingError

__all__ = ["MAX_PREDICTION_CV", "predicted_outputs"]

#: The largest coefficient of variation accepted for the prediction error.
MAX_PREDICTION_CV = 10.0

#: Tags the predictions' random stream apart from the workload's and the noise's.
_STREAM = 0x707265


def predicted_outputs(output: np.ndarray, cv: float, seed: int) -> np.ndarray:
    """Predicted output lengths for the true ones ``output`` (module docstring).

    Raises
    ------
    ServingError
        If ``cv`` is not in ``[0, MAX_PREDICTION_CV]``.
    """
    if isinstance(cv, bool) or not (isinstance(cv, int | float) and 0 <= cv <= MAX_PREDICTION_CV):
        raise ServingError(
            f"prediction_cv: must be a number from 0 to {MAX_PREDICTION_CV:g}, got {cv!r}"
        )
    true = np.asarray(output, dtype=np.int64)
    if cv == 0:
        return true.copy()
    sigma = math.sqrt(math.log1p(cv * cv))
    rng = np.random.default_rng([_STREAM, seed])
    factor = rng.lognormal(-sigma * sigma / 2, sigma, true.size)
    return np.maximum(1, np.rint(true * factor)).astype(np.int64)
