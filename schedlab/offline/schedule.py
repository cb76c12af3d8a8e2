"""Schedules and their evaluation (``docs/design.md``, "Offline model").

A schedule is one start round ``p_i`` per request. Request ``i`` completes at
``C_i = p_i + o_i``; the objective is the total end-to-end latency
``sum_i (C_i - a_i)``. Feasibility is *not* checked here: that is the job of the
independent :mod:`schedlab.offline.verify`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from schedlab.budget import Budget
from schedlab.errors import ScheduleError
from schedlab.offline.instance import MAX_VALUE, Instance

__all__ = ["PROFILE_BYTES", "Schedule", "load_profile", "total_latency"]

#: Bytes a round of the load profile takes while it is built: the profile and the
#: running sums, counts and rounds of :func:`load_profile`.
PROFILE_BYTES = 6 * 8


def total_latency(instance: Instance, starts: np.ndarray) -> int:
    """The objective ``sum_i (p_i + o_i - a_i)`` of start rounds ``starts``."""
    return int((np.asarray(starts) + instance.output - instance.arrival).sum())


def load_profile(
    instance: Instance,
    starts: np.ndarray,
    origin: int,
    span: int,
    kept: np.ndarray | None = None,
) -> np.ndarray:
    """Tokens held in rounds ``origin .. span - 1`` (one entry a round) by the requests
    ``kept`` (a mask; all by default) started at ``starts``.

    With ``c(t)`` the number of them active in round ``t`` and ``W(t)`` the sum of their
    ``s_i - p_i + 1``, the load is ``W(t) + t c(t)``: two running sums of the changes at
    starts and completions, clipped to the rounds asked for, so that the result's size
    does not grow with the round numbers.
    """
    kept = np.ones(instance.n, dtype=bool) if kept is None else kept
    length = span - origin
    p = np.asarray(starts, dtype=np.int64)[kept]
    first = np.clip(p - origin, 0, length)
    stop = np.clip(p + instance.output[kept] - origin, 0, length)
    offset = instance.prompt[kept] - p + 1
    count = np.zeros(length + 1, dtype=np.int64)
    weight = np.zeros(length + 1, dtype=np.int64)
    np.add.at(count, first, 1)
    np.add.at(count, stop, -1)
    np.add.at(weight, first, offset)
    np.add.at(weight, stop, -offset)
    rounds = np.arange(origin, span, dtype=np.int64)
    return np.cumsum(weight)[:length] + rounds * np.cumsum(count)[:length]


@dataclass(frozen=True, eq=False)
class Schedule:
    """Start rounds for every request of an instance, with the metrics they imply.

    Parameters
    ----------
    instance
        The instance scheduled.
    starts
        ``starts[i]`` is the start round ``p_i`` of request ``i`` (integers).

    Raises
    ------
    ScheduleError
        If ``starts`` does not have one integer per request.
    """

    instance: Instance
    starts: np.ndarray

    def __init__(self, instance: Instance, starts: Sequence[int] | np.ndarray) -> None:
        array = np.asarray(starts)
        if array.shape != (instance.n,):
            raise ScheduleError(
                f"starts: expected {instance.n} start rounds, got shape {array.shape}"
            )
        if array.dtype.kind == "f":
            if not (np.isfinite(array).all() and (array == np.round(array)).all()):
                raise ScheduleError("starts: every start must be an integer round")
        elif array.dtype.kind not in "iu":
            raise ScheduleError(f"starts: expected integers, got dtype {array.dtype}")
        if array.size and array.max() > MAX_VALUE:  # before the cast, which would wrap
            late = int(np.argmax(array))
            raise ScheduleError(
                f"starts: request {late} starts in round {array[late]}, above 2**40, the "
                "latest round schedlab computes with"
            )
        array = array.astype(np.int64)
        latest = int(array.max()) + int(instance.output.max()) if array.size else 0
        if instance.n * latest > np.iinfo(np.int64).max:
            raise ScheduleError(
                f"starts: {instance.n:,} requests ending as late as round {latest:,}: the "
                "objective could overflow 64-bit integers"
            )
        array.setflags(write=False)
        object.__setattr__(self, "instance", instance)
        object.__setattr__(self, "starts", array)

    @cached_property
    def completion(self) -> np.ndarray:
        """Completion rounds ``C_i = p_i + o_i``."""
        return self.starts + self.instance.output

    @cached_property
    def latency(self) -> np.ndarray:
        """End-to-end latencies ``C_i - a_i``."""
        return self.completion - self.instance.arrival

    @property
    def objective(self) -> int:
        """Total end-to-end latency ``sum_i (C_i - a_i)``."""
        return total_latency(self.instance, self.starts)

    @property
    def mean_latency(self) -> float:
        """Mean end-to-end latency in rounds."""
        return float(self.latency.mean())

    @property
    def makespan(self) -> int:
        """Last completion round ``max_i C_i``."""
        return int(self.completion.max())

    @cached_property
    def memory_profile(self) -> np.ndarray:
        """Tokens held in each round ``t = 0 .. makespan - 1`` (one entry a round).

        With ``c(t)`` the number of active requests and ``W(t)`` the sum of
        ``s_i - p_i + 1`` over them, the load is ``W(t) + t c(t)``.

        Raises
        ------
        MemoryBudgetError
            If its arrays (:data:`PROFILE_BYTES` a round) would pass the default memory
            budget (:func:`~schedlab.budget.default_max_memory`): a request released far
            out in time makes the makespan long. :meth:`load_points` gives the same
            loads in ``O(n)`` memory.
        """
        rounds = self.makespan
        Budget().require("memory_profile", PROFILE_BYTES * rounds, f"{rounds:,} rounds")
        return load_profile(self.instance, self.starts, 0, rounds)

    def load_points(self) -> tuple[np.ndarray, np.ndarray]:
        """The load of :attr:`memory_profile` at the first and last round of each stretch
        between two rounds where requests start or end, from round 0 to ``makespan - 1``:
        rounds (increasing) and tokens held.

        Within a stretch the same requests run, so the load ``W + t c`` is linear in
        ``t``: joining these points by straight lines draws the profile exactly, in
        ``O(n)`` memory however long the makespan.
        """
        inst = self.instance
        weight = inst.prompt - self.starts + 1
        events = np.concatenate([self.starts, self.completion])
        order = np.argsort(events, kind="stable")
        events = events[order]
        ones = np.ones(inst.n, np.int64)
        count = np.cumsum(np.concatenate([ones, -ones])[order])
        held = np.cumsum(np.concatenate([weight, -weight])[order])
        last = np.flatnonzero(events[:-1] != events[1:])  # last event of each round but the end
        first, final = events[last], events[last + 1] - 1  # each stretch's first and last round
        rounds: np.ndarray = np.stack([first, final], axis=1).ravel()
        loads: np.ndarray = held[last].repeat(2) + rounds * count[last].repeat(2)
        if inst.n and events[0] > 0:  # nothing runs before the first start
            rounds = np.concatenate([[0, events[0] - 1], rounds])
            loads = np.concatenate([[0, 0], loads])
        return rounds.astype(np.int64), loads.astype(np.int64)

    @property
    def peak_memory(self) -> int:
        """Largest number of tokens held in any round.

        Computed from the rounds where requests start or end (the load grows between
        them, so each stretch peaks in its last round: :meth:`load_points`), without a
        per-round array.
        """
        return int(self.load_points()[1].max())

    @property
    def utilisation(self) -> float:
        """Share of the memory-time area ``M * makespan`` the requests use."""
        return float(self.instance.volume.sum() / (self.instance.kv_tokens * self.makespan))

    def summary(self) -> dict[str, float | int]:
        """The headline metrics as a plain dict."""
        return {
            "objective": self.objective,
            "mean_latency": self.mean_latency,
            "makespan": self.makespan,
            "peak_memory": self.peak_memory,
            "utilisation": self.utilisation,
        }
