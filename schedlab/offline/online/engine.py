r"""The online engine: a policy decides round by round, seeing only what has happened.

:func:`run_online` plays an instance against a :class:`Policy`. Before each round
:math:`t` the policy may be asked for a :class:`Decision`: which running requests to
evict (each frees its memory and loses its progress) and which released, waiting ones to
start. It sees a :class:`View`: the round, the KV budget :math:`M` (``kv_tokens``), and
for each *released* request its prompt, predicted interval, whether it runs or has
finished, the rounds done in its current run and its current run's start; a request's
true output length is revealed when it finishes, not before (``View.output`` is ``-1``
until then). The true lengths stay in the engine.

Then round :math:`t` runs: a request in the :math:`q`-th round of its run holds
:math:`s_i + q` tokens. The engine refuses, with a
:class:`~schedlab.errors.SolverError` naming the policy and the round, a decision that
would make the running requests hold more than :math:`M` tokens in round :math:`t`, one
that starts a request not released and waiting or evicts one not running, and a policy
that leaves requests waiting with nothing running and no round to wake it.

Event to event
--------------
Nothing a policy sees changes between two *events*: a completion (a length is
revealed), a release, and the round before the running requests would overflow
memory (their load :math:`W + c\,t` rises by :math:`c`, the number running, a round).
So the engine asks the policy at those rounds only, and at the round the policy named
in its last decision (``Decision.wake``), and jumps over the rounds between, in which
every running request simply gains a token. A policy that wants to be asked every round
returns ``wake = view.round + 1``.

The result is the schedule's :data:`~schedlab.offline.online.runs.Runs`; it is checked
independently by :func:`~schedlab.offline.online.runs.verify_runs`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from schedlab.arguments_check import check_type
from schedlab.errors import InputTypeError, SolverError
from schedlab.offline.instance import Instance, check_instance
from schedlab.offline.online.runs import Runs
from schedlab.predictions import Intervals

__all__ = ["Decision", "Policy", "View", "run_online"]


@dataclass(frozen=True)
class Decision:
    """A policy's decision before a round.

    Attributes
    ----------
    evict
        Running requests to evict (their memory is freed, their progress lost).
    start
        Released, waiting requests to start this round.
    wake
        A later round in which to ask again even if no event happens (``None``: only at
        events).
    """

    evict: Sequence[int] = ()
    start: Sequence[int] = ()
    wake: int | None = None


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


class View:
    """What a policy may read before round :attr:`round` (module docs).

    Arrays have one entry per request, are read-only, and hold ``-1`` for what the policy
    may not know yet: the prompt and interval of a request not released, the output
    length of one not finished, the run start of one not running. The requests released
    so far are also :meth:`released_in_order`, and the running ones
    :meth:`running_indices`: a policy that keeps its own state across decisions reads
    those in time proportional to what changed, not to ``n``.
    """

    def __init__(
        self,
        kv_tokens: int,
        prompt: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        output: np.ndarray,
        run_start: np.ndarray,
        running: np.ndarray,
        finished: np.ndarray,
        released: np.ndarray,
    ) -> None:
        self.round = 0
        self.kv_tokens = kv_tokens
        self.n = len(prompt)
        self.prompt = _read_only(prompt)
        self.lower = _read_only(lower)
        self.upper = _read_only(upper)
        self.output = _read_only(output)
        self.run_start = _read_only(run_start)
        self.running = _read_only(running)
        self.finished = _read_only(finished)
        self.released = _read_only(released)
        # the release order (by index for a view built by hand; the engine sets its own),
        # how many are released, the running requests, and the arrays _run and _stop change
        self._release_order = _read_only(np.flatnonzero(released))
        self._released_count = len(self._release_order)
        self._running = set(np.flatnonzero(running).tolist())
        self._states = (running, run_start)

    def released_in_order(self) -> np.ndarray:
        """The requests released so far, in the order of release (ties by index): a
        read-only view, which grows by the requests released since a policy last read
        it; the order of those still to come is not shown."""
        return self._release_order[: self._released_count]

    def running_indices(self) -> np.ndarray:
        """The running requests, by increasing index (a new array)."""
        return np.array(sorted(self._running), dtype=np.int64)

    def _run(self, i: int, t: int) -> None:
        """The engine starts request ``i`` in round ``t``."""
        running, run_start = self._states
        running[i], run_start[i] = True, t
        self._running.add(i)

    def _stop(self, i: int) -> None:
        """Request ``i`` stops running (it finished or was evicted)."""
        running, run_start = self._states
        running[i], run_start[i] = False, -1
        self._running.discard(i)

    @property
    def waiting(self) -> np.ndarray:
        """Released requests neither running nor finished (a new array)."""
        return self.released & ~self.running & ~self.finished

    @property
    def progress(self) -> np.ndarray:
        """Rounds done in each running request's current run (0 if not running; a new
        array): it holds ``prompt + progress + 1`` tokens in the coming round."""
        return np.where(self.running, self.round - self.run_start, 0)

    def load(self, running: np.ndarray | None = None) -> int:
        """Tokens the running requests (or those of the mask ``running``) hold in the
        coming round if none is evicted."""
        which = self.running_indices() if running is None else running
        return int((self.prompt[which] + self.round - self.run_start[which] + 1).sum())


class Policy(Protocol):
    """An online scheduling policy: one object per run."""

    #: Its name in error messages.
    name: str

    def decide(self, view: View) -> Decision:
        """The decision before round ``view.round``."""
        ...


def _check_arguments(instance: Instance, intervals: Intervals, policy: Policy) -> None:
    """The door check of :func:`run_online`: its arguments' types.

    Raises
    ------
    InputTypeError
        Naming the first argument of the wrong type.
    """
    check_instance(instance, "run_online: instance")
    check_type(intervals, (Intervals,), "run_online: intervals")
    if not callable(getattr(policy, "decide", None)):
        raise InputTypeError(
            f"run_online: policy: expected a Policy (with a decide method), got "
            f"{type(policy).__name__} {policy!r:.60}"
        )


def run_online(instance: Instance, intervals: Intervals, policy: Policy) -> Runs:
    """Play ``instance`` against ``policy``, which sees ``intervals`` but no true length
    before its request finishes (module docs).

    Parameters
    ----------
    instance
        The instance; its output lengths are the truth the engine keeps.
    intervals
        The predictions the policy sees, checked against the true lengths
        (:meth:`~schedlab.predictions.Intervals.check`).
    policy
        A fresh :class:`Policy`.

    Returns
    -------
    Runs
        Each request's runs, in order; the last completes.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for an ``instance`` that is no :class:`Instance`, ``intervals``
        that are no :class:`~schedlab.predictions.Intervals`, a ``policy`` without a
        ``decide`` method.
    PredictionError
        If the intervals do not fit the instance.
    SolverError
        If the policy breaks the rules (module docs), naming it and the round.
    """
    # Over 100 lines by design: one round loop: the policy's decision, the checks of it and the
    # round's accounting read together.
    _check_arguments(instance, intervals, policy)
    intervals.check(instance.output, "predictions")
    n, memory = instance.n, instance.kv_tokens
    prompt, output, arrival = instance.prompt, instance.output, instance.arrival
    hidden = np.full(n, -1, dtype=np.int64)
    seen_prompt, seen_lower, seen_upper = hidden.copy(), hidden.copy(), hidden.copy()
    revealed, run_start = hidden.copy(), hidden.copy()
    running = np.zeros(n, dtype=bool)
    finished = np.zeros(n, dtype=bool)
    released = np.zeros(n, dtype=bool)
    by_release = np.argsort(arrival, kind="stable")
    view = View(
        memory, seen_prompt, seen_lower, seen_upper, revealed, run_start, running, finished,
        released,
    )  # fmt: skip
    view._release_order = _read_only(by_release)
    runs: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    next_release = 0
    ends: list[tuple[int, int, int]] = []  # (true completion, request, run start)
    weight = count = 0  # load in round t is weight + count * t
    done = 0
    t = int(arrival.min())
    wake: int | None = None
    name = getattr(policy, "name", type(policy).__name__)

    def refuse(message: str) -> SolverError:
        return SolverError(f"online policy {name}: round {t}: {message}")

    while True:
        event = False
        while ends and ends[0][0] <= t:
            _, i, start = heapq.heappop(ends)
            if not running[i] or run_start[i] != start:
                continue  # that run was evicted
            view._stop(i)
            finished[i], revealed[i] = True, output[i]
            runs[i].append((start, int(output[i])))
            weight -= int(prompt[i]) - start + 1
            count -= 1
            done += 1
            event = True
        while next_release < n and arrival[by_release[next_release]] <= t:
            i = by_release[next_release]
            released[i] = True
            seen_prompt[i], seen_lower[i], seen_upper[i] = (
                prompt[i], intervals.lower[i], intervals.upper[i],
            )  # fmt: skip
            next_release = view._released_count = next_release + 1
            event = True
        if done == n:
            break
        if event or weight + count * t > memory or (wake is not None and wake <= t):
            view.round = t
            decision = policy.decide(view)
            for i in _indices(decision.evict, n, refuse, "evicts"):
                if not running[i]:
                    raise refuse(f"evicts request {i}, which is not running")
                start = int(run_start[i])  # before t: one decision a round
                runs[i].append((start, t - start))
                view._stop(i)
                weight -= int(prompt[i]) - start + 1
                count -= 1
            for i in _indices(decision.start, n, refuse, "starts"):
                if not released[i] or running[i] or finished[i]:
                    state = (
                        "running" if running[i] else "finished" if finished[i] else "unreleased"
                    )
                    raise refuse(f"starts request {i}, which is {state}")
                view._run(i, t)
                heapq.heappush(ends, (t + int(output[i]), int(i), t))
                weight += int(prompt[i]) - t + 1
                count += 1
            wake = decision.wake
        load = weight + count * t
        if load > memory:
            raise refuse(f"the running requests would hold {load} tokens, above M = {memory}")
        while ends and (not running[ends[0][1]] or run_start[ends[0][1]] != ends[0][2]):
            heapq.heappop(ends)  # evicted runs' completions
        following = [ends[0][0]] if ends else []
        if next_release < n:
            following.append(int(arrival[by_release[next_release]]))
        if wake is not None and wake > t:
            following.append(wake)
        if count:
            following.append((memory - weight) // count + 1)  # first round over M
        if not following:
            raise refuse(
                f"{n - done} request(s) wait with nothing running, no release to come and "
                "no round to wake the policy"
            )
        t = max(t + 1, min(following))
    return tuple(tuple(request) for request in runs)


def _indices(
    values: Sequence[int], n: int, refuse: Callable[[str], SolverError], verb: str
) -> list[int]:
    """``values`` as distinct request indices, or the engine's refusal."""
    found: list[int] = []
    for value in values:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | np.integer)
            or not 0 <= value < n
        ):
            raise refuse(f"{verb} {value!r}, which is no request")
        found.append(int(value))
    if len(set(found)) != len(found):
        raise refuse(f"{verb} a request twice")
    return found
