"""Local search over priority orders decoded by list scheduling (Wang, Ye, Zhou).

A solution is a priority order; its value is the total latency of the schedule the
strict list-scheduling engine makes of it. Moves:

* ``swap(i, j)``: exchange the requests at positions ``i`` and ``j``;
* ``insert(i, j)``: take the request at position ``i`` out and put it at position ``j``.

Both pick ``i`` uniformly and ``j`` within ``window`` positions of ``i`` (seeded
``numpy.random.Generator``). ``first`` improvement accepts the first improving move;
``best`` samples ``neighbours`` moves and accepts the best improving one. The search
starts from the best of the list-scheduling rules (and Sorted-F's batch order), stops at
``time_limit`` (required: local search has no natural end) or after ``max_moves``, and
returns the best of the strict and backfilling decodes of the best order and MC-SF's
schedule (so it is never worse than the best rule).

Incremental evaluation
----------------------
On a backlog (all releases 0) the strict engine starts the requests in order, each in
the earliest round, no earlier than its predecessor's start, in which it fits beside the
requests already started. So the starts of positions ``< lo`` do not depend on the order
after ``lo``: a move touching positions ``lo..hi`` is evaluated by restoring the engine
state saved at the last checkpoint ``<= lo`` (every ``checkpoint`` positions) and
replaying only the suffix. With ``screen`` set, the replay first stops ``screen``
positions after ``hi`` and estimates the change as the start shifts so far plus the last
shift times the number of requests left; only moves whose estimate is negative are
replayed to the end, and only an exact improvement is accepted. With releases, every
move is evaluated by a full :func:`~schedlab.list_scheduling.list_schedule` call.

The replay drives the engine's own running-set state (``_Running`` of
:mod:`schedlab.list_scheduling`: completion bookkeeping and the admission test
``earliest_fit``); ``tests/solvers/test_local_search.py`` checks it reproduces
:func:`~schedlab.list_scheduling.list_schedule` exactly.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from schedlab.errors import SchedlabError
from schedlab.instance import Instance
from schedlab.list_scheduling import _Running, check_order, list_schedule
from schedlab.result import SolverOutput
from schedlab.solvers import register_solver
from schedlab.solvers.rules import RULES, priority_order
from schedlab.solvers.sorted_f import batch_order, sorted_f_batches

__all__ = ["OrderEvaluator", "best_start_order", "improve_order"]

_State = tuple[int, list[int], list[int], int]


@dataclass
class _Replay:
    starts: list[int]  # starts by position from ``lo`` on
    checkpoints: dict[int, _State]
    total: int  # sum of starts over all positions


class OrderEvaluator:
    """Strict-mode list-scheduling of orders on a backlog, resumable from checkpoints.

    Parameters
    ----------
    instance
        A backlog (every release round 0).
    order
        The current order.
    checkpoint
        Positions between saved engine states.
    """

    def __init__(self, instance: Instance, order: np.ndarray, checkpoint: int = 16) -> None:
        if int(instance.arrival.max()) != 0:
            raise SchedlabError("OrderEvaluator: needs a backlog (every release round 0)")
        self.memory = instance.memory
        self.prompt = instance.prompt.tolist()
        self.output = instance.output.tolist()
        self.every = max(1, int(checkpoint))
        self.order = check_order(order, instance.n)
        replay = self._replay(self.order, 0, None, 0)
        self.starts = replay.starts
        self.checkpoints = replay.checkpoints
        self.total = replay.total
        self.full_replays = 0

    def _restore(self, position: int) -> tuple[int, _Running]:
        t, completion, weight, total_weight = self.checkpoints[position]
        running = _Running(self.memory)
        running.completion = list(completion)
        running.weight = list(weight)
        running.total_weight = total_weight
        return t, running

    def _replay(self, order: list[int], lo: int, stop: int | None, prefix: int) -> _Replay:
        """Decode ``order`` from checkpoint ``lo`` up to position ``stop`` (exclusive)."""
        if lo == 0:
            t, running = 0, _Running(self.memory)
        else:
            t, running = self._restore(lo)
        end = len(order) if stop is None else min(stop, len(order))
        starts: list[int] = []
        checkpoints: dict[int, _State] = {}
        total = prefix
        prompt, output, every = self.prompt, self.output, self.every
        for position in range(lo, end):
            if position % every == 0:
                checkpoints[position] = (
                    t,
                    list(running.completion),
                    list(running.weight),
                    running.total_weight,
                )
            i = order[position]
            running.finish_until(t)
            while True:
                nxt = running.next_completion()
                fit = running.earliest_fit(t, prompt[i], output[i], nxt)
                if fit != math.inf:
                    t = int(fit)
                    break
                t = int(nxt)
                running.finish_until(t)
            running.add(t, prompt[i], output[i])
            starts.append(t)
            total += t
        return _Replay(starts, checkpoints, total)

    def objective(self) -> int:
        """Total latency of the current order's strict schedule."""
        return self.total + sum(self.output)

    def try_move(self, order: list[int], lo: int, hi: int, screen: int | None) -> _Replay | None:
        """Replay ``order`` (equal to the current one before ``lo``); the replay if better.

        ``hi`` is the last changed position; ``screen`` as in the module docs.
        """
        base = (lo // self.every) * self.every
        prefix = sum(self.starts[:base])
        if screen is not None and hi + screen + 1 < len(order):
            stop = hi + screen + 1
            partial = self._replay(order, base, stop, 0)
            shift = [
                new - old for new, old in zip(partial.starts, self.starts[base:stop], strict=True)
            ]
            if sum(shift) + shift[-1] * (len(order) - stop) >= 0:
                return None
        self.full_replays += 1
        replay = self._replay(order, base, None, prefix)
        if replay.total >= self.total:
            return None
        replay.starts = self.starts[:base] + replay.starts
        return replay

    def accept(self, order: list[int], replay: _Replay) -> None:
        """Make ``order`` (evaluated by :meth:`try_move`) the current order."""
        self.order = order
        self.starts = replay.starts
        self.total = replay.total
        self.checkpoints.update(replay.checkpoints)

    def schedule(self) -> np.ndarray:
        """Start round of each request under the current order."""
        starts = np.empty(len(self.order), dtype=np.int64)
        starts[self.order] = self.starts
        return starts


def _objective(instance: Instance, starts: np.ndarray) -> int:
    return int((starts + instance.output - instance.arrival).sum())


def best_start_order(
    instance: Instance, *, time_limit: float | None = None
) -> tuple[np.ndarray, str]:
    """The order, among the rules' and Sorted-F's, whose strict decode is best."""
    candidates = {rule: priority_order(instance, rule) for rule in RULES}
    batches, _ = sorted_f_batches(instance, method="fast", time_limit=time_limit)
    candidates["sorted-f"] = batch_order(batches)
    scores = {
        name: _objective(instance, list_schedule(instance, order))
        for name, order in candidates.items()
    }
    name = min(scores, key=lambda k: scores[k])
    return candidates[name], name


def _neighbour(
    order: list[int], rng: np.random.Generator, window: int
) -> tuple[list[int], int, int]:
    n = len(order)
    i = int(rng.integers(n))
    j = int(np.clip(i + rng.integers(-window, window + 1), 0, n - 1))
    if j == i:
        j = (i + 1) % n
    new = list(order)
    if rng.random() < 0.5:
        new[i], new[j] = new[j], new[i]
    else:
        new.insert(j, new.pop(i))
    return new, min(i, j), max(i, j)


def improve_order(
    instance: Instance,
    order: np.ndarray,
    *,
    time_limit: float,
    seed: int = 0,
    strategy: str = "first",
    window: int = 50,
    neighbours: int = 20,
    screen: int | None = 32,
    max_moves: int | None = None,
    checkpoint: int = 16,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Improve ``order`` by swap / insert moves for ``time_limit`` seconds.

    Returns the best order found and statistics (moves evaluated, moves replayed to the
    end, moves accepted, moves per second).
    """
    if strategy not in ("first", "best"):
        raise SchedlabError(f"local-search: strategy must be 'first' or 'best', got {strategy!r}")
    if window < 1 or neighbours < 1:
        raise SchedlabError("local-search: window and neighbours must be >= 1")
    rng = np.random.default_rng(seed)
    began = time.perf_counter()
    deadline = began + time_limit
    n = instance.n
    current = check_order(order, n)
    moves = full = accepted = 0
    backlog = int(instance.arrival.max()) == 0
    if n < 2:
        return np.array(current), {"moves": 0, "accepted": 0, "full_evaluations": 0}
    evaluator = OrderEvaluator(instance, np.array(current), checkpoint) if backlog else None
    value = (
        evaluator.objective()
        if evaluator
        else _objective(instance, list_schedule(instance, current))
    )
    while time.perf_counter() < deadline and (max_moves is None or moves < max_moves):
        tries = 1 if strategy == "first" else neighbours
        best: tuple[int, list[int], Any] | None = None
        for _ in range(tries):
            candidate, lo, hi = _neighbour(current, rng, window)
            moves += 1
            if evaluator is not None:
                replay = evaluator.try_move(candidate, lo, hi, screen)
                if replay is not None:
                    total = replay.total + sum(evaluator.output)
                    if best is None or total < best[0]:
                        best = (total, candidate, replay)
            else:
                full += 1
                total = _objective(instance, list_schedule(instance, candidate))
                if total < value and (best is None or total < best[0]):
                    best = (total, candidate, None)
        if best is not None:
            value, current = best[0], best[1]
            if evaluator is not None:
                evaluator.accept(current, best[2])
            accepted += 1
    elapsed = time.perf_counter() - began
    if evaluator is not None:
        full = evaluator.full_replays
    return np.array(current, dtype=np.int64), {
        "moves": moves,
        "accepted": accepted,
        "full_evaluations": full,
        "moves_per_s": moves / elapsed if elapsed > 0 else 0.0,
        "objective_strict": value,
    }


@register_solver("local-search")
def local_search(
    instance: Instance,
    *,
    time_limit: float | None = None,
    seed: int = 0,
    strategy: str = "first",
    window: int = 50,
    neighbours: int = 20,
    screen: int | None = 32,
    max_moves: int | None = None,
    **options: Any,
) -> SolverOutput:
    """Swap / insert local search on priority orders (module docs).

    ``time_limit`` defaults to 10 s when ``None``. Same seed, same moves; with
    ``max_moves`` set and a generous time limit the result is reproducible exactly.
    """
    if options:
        raise TypeError(f"local-search: unknown option(s) {', '.join(sorted(options))}")
    began = time.perf_counter()
    budget = 10.0 if time_limit is None else time_limit
    order, start = best_start_order(instance, time_limit=budget / 4)
    left = max(budget - (time.perf_counter() - began), 1e-3)
    # keep a margin for the final decodes
    order, stats = improve_order(
        instance,
        order,
        time_limit=0.9 * left,
        seed=seed,
        strategy=strategy,
        window=window,
        neighbours=neighbours,
        screen=screen,
        max_moves=max_moves,
    )
    decodes = {
        "strict": list_schedule(instance, order),
        "backfill": list_schedule(instance, order, backfill=True),
        # the best rule's own schedule may backfill (MC-SF); never return worse than it
        "mc-sf": list_schedule(instance, priority_order(instance, "mc-sf"), backfill=True),
    }
    objectives = {k: _objective(instance, v) for k, v in decodes.items()}
    chosen = min(objectives, key=lambda k: objectives[k])
    return SolverOutput(
        decodes[chosen],
        stats={**stats, "start": start, "objectives": objectives, "chosen": chosen},
    )
