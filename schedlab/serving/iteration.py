"""One iteration of an engine: how long it lasts, and what it ran.

Both engine kinds (:mod:`schedlab.serving.engine_kinds`) time their iterations with an
:class:`IterationClock` under an :class:`IterationTime` (the cost models the policy plans
with and the one time advances by, and their noise), and keep a :class:`BatchRecord` per
iteration when asked, so their runs are read and audited the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schedlab.errors import ServingError
from schedlab.serving.cost_model import BatchShape, CostModel, batch_time, lockstep_time

__all__ = ["MAX_ITERATION_S", "MAX_NOISE_CV", "BatchRecord", "IterationClock", "IterationTime"]

_NOISE_BLOCK = 4096
#: The largest coefficient of variation of the iteration-time noise (a lognormal factor
#: of CV 10 already has a median of 1/10 of its mean).
MAX_NOISE_CV = 10.0
#: The longest iteration a cost model may predict, in seconds: an hour, as for the
#: measured times of a GPU profile (:data:`schedlab.calibration.profiles.MAX_TIME_S`).
#: Far beyond any real batch, it keeps the clock's sums far from overflowing to
#: infinity (a coefficient of 1e307 s did, and ``--json`` printed ``Infinity``).
MAX_ITERATION_S = 3600.0


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One iteration, recorded when asked (for audits, tests and time series).

    Attributes
    ----------
    start_s, end_s
        When it ran.
    decodes
        Indices of the requests decoding in it.
    chunks
        ``(request index, tokens)`` prefill chunks.
    preempted
        Requests preempted when it started, in the order they were.
    reused
        ``(request index, tokens)``: KV tokens a (re)admitted request took back from the
        prefix cache.
    running, waiting
        The scheduler's queues once the iteration's batch was scheduled, as vLLM's
        ``len(scheduler.running)`` and ``len(scheduler.waiting)`` right after
        ``schedule()``: requests admitted (under asynchronous scheduling also those that
        finished in the previous iteration, whose output the scheduler has not seen
        yet), and requests handed to the scheduler and not admitted (preempted ones
        included; under asynchronous scheduling not those that arrived while the
        previous batch ran).
    used_blocks
        KV blocks held by requests while it ran.
    handed_off
        Requests whose prefill completed in it and that left for another node (a
        prefill-only node of a cluster, :mod:`schedlab.serving.cluster`): no token was
        emitted for them, and they keep their blocks until
        :meth:`~schedlab.serving.engine.Engine.release`.
    received
        ``(request index, tokens)``: KV tokens an admitted request brought from another
        node (a transfer), allocated here without being computed here.
    shape
        The batch as the cost model saw it.
    """

    start_s: float
    end_s: float
    decodes: tuple[int, ...]
    chunks: tuple[tuple[int, int], ...]
    preempted: tuple[int, ...]
    reused: tuple[tuple[int, int], ...] = ()
    running: int = 0
    waiting: int = 0
    used_blocks: int = 0
    handed_off: tuple[int, ...] = ()
    received: tuple[tuple[int, int], ...] = ()
    shape: BatchShape | None = None


@dataclass(frozen=True)
class IterationTime:
    """How an iteration's duration is found.

    Attributes
    ----------
    predicted
        The model the policy plans with; time advances by it unless one of the others
        is given.
    actual
        A second model for the actual duration.
    noise_cv
        Actual = predicted x lognormal noise of mean 1 and this coefficient of variation
        (seeded by ``seed``); not with ``actual``, which sets the actual time itself
        (:class:`~schedlab.serving.scenario.Scenario` refuses the pair).
    seed
        Seed of the noise.
    """

    predicted: CostModel
    actual: CostModel | None = None
    noise_cv: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.noise_cv <= MAX_NOISE_CV:
            raise ServingError(
                f"noise_cv: must be from 0 to {MAX_NOISE_CV:g}, got {self.noise_cv}"
            )


class IterationClock:
    """The durations of one replica's iterations, as :class:`IterationTime` says.

    Parameters
    ----------
    timing
        The cost models and the noise.
    index
        The replica's number: replica 0 draws its noise from ``timing.seed`` alone (one
        engine's noise does not depend on the replica count), the others from
        independent streams of ``(seed, index)``.
    """

    def __init__(self, timing: IterationTime, index: int = 0) -> None:
        self.timing = timing
        self._sigma = math.sqrt(math.log1p(timing.noise_cv**2))
        self._rng = np.random.default_rng(timing.seed if index == 0 else (timing.seed, index))
        self._noise: list[float] = []

    def seconds(self, shape: BatchShape, group: Sequence[BatchShape] = ()) -> float:
        """How long the batch ``shape`` takes (predicted, actual, or predicted times the
        next noise factor); with ``group``, the batches of all replicas in lockstep, how
        long their step takes (:func:`~schedlab.serving.cost_model.lockstep_time`).

        Raises
        ------
        ServingError
            If the model's time is not a positive number of at most
            :data:`MAX_ITERATION_S` seconds.
        """
        timing = self.timing
        model = timing.predicted if timing.actual is None else timing.actual
        seconds = _checked(
            lockstep_time(model, group) if group else batch_time(model, shape), shape
        )
        if timing.actual is None and self._sigma > 0:
            seconds *= self._next_noise()  # finite and positive: a lognormal factor
        return seconds

    def _next_noise(self) -> float:
        if not self._noise:
            sigma = self._sigma
            draws = self._rng.lognormal(-sigma * sigma / 2, sigma, _NOISE_BLOCK)
            self._noise = draws.tolist()[::-1]
        return self._noise.pop()


def _checked(seconds: float, shape: BatchShape) -> float:
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_ITERATION_S):
        raise ServingError(
            f"cost model: iteration time {seconds!r} s for {shape.n_decode} decodes and "
            f"chunks {list(shape.chunks)} must be positive and at most "
            f"{MAX_ITERATION_S:g} s"
        )
    return seconds
