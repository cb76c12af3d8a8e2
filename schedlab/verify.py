"""The independent schedule verifier (DESIGN section 1).

It shares no code with any solver, the list-scheduling engine or
:mod:`schedlab.schedule`: it recomputes the memory profile its own way (second-order
differences of the per-round load) so that a bug in one place cannot hide in both.

Checked, and reported in words:

* every request appears exactly once (for the pair form of a schedule),
* starts are integers with ``p_i >= a_i`` (release),
* in every round ``t`` the active requests hold at most ``M`` tokens, where request ``i``
  holds ``s_i + (t - p_i + 1)`` tokens in rounds ``p_i .. p_i + o_i - 1``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from schedlab.errors import ScheduleError
from schedlab.instance import Instance

__all__ = ["assert_feasible", "verify"]

StartsLike = Sequence[Any] | np.ndarray | Mapping[int, Any] | Iterable[tuple[int, Any]]


def _as_pairs(starts: StartsLike) -> list[tuple[Any, Any]]:
    if isinstance(starts, Mapping):
        return list(starts.items())
    if isinstance(starts, np.ndarray):
        return list(enumerate(starts.tolist()))
    items = list(starts)
    if items and all(isinstance(x, tuple | list) and len(x) == 2 for x in items):
        return [tuple(x) for x in items]
    return list(enumerate(items))


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def verify(instance: Instance, starts: StartsLike) -> list[str]:
    """Return every violation of ``starts`` on ``instance``, in words (empty if feasible).

    Parameters
    ----------
    instance
        The instance.
    starts
        Either a sequence whose i-th entry is request i's start round, or a mapping /
        sequence of ``(request, start)`` pairs (then duplicates and missing requests
        are detected too).
    """
    n = instance.n
    problems: list[str] = []
    chosen: dict[int, int] = {}
    for request, start in _as_pairs(starts):
        i = _integer(request)
        if i is None or not 0 <= i < n:
            problems.append(f"unknown request {request!r} (the instance has requests 0..{n - 1})")
            continue
        p = _integer(start)
        if p is None:
            problems.append(f"request {i}: start must be an integer round, got {start!r}")
            continue
        if i in chosen:
            problems.append(f"request {i}: scheduled more than once (rounds {chosen[i]} and {p})")
            continue
        chosen[i] = p
    missing = [i for i in range(n) if i not in chosen]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        problems.append(f"{len(missing)} request(s) not scheduled: {shown}")
    for i, p in sorted(chosen.items()):
        a = instance.requests[i].arrival
        if p < a:
            problems.append(f"request {i}: starts in round {p}, before its release round {a}")
    if chosen:
        problems.extend(_memory_violations(instance, chosen))
    return problems


def _memory_violations(instance: Instance, chosen: dict[int, int]) -> list[str]:
    idx = np.fromiter(chosen.keys(), dtype=np.int64)
    p = np.fromiter(chosen.values(), dtype=np.int64)
    s = np.array([instance.requests[i].prompt for i in idx.tolist()], dtype=np.int64)
    o = np.array([instance.requests[i].output for i in idx.tolist()], dtype=np.int64)
    shift = min(int(p.min()), 0)  # negative starts were reported as release violations
    p = p - shift
    horizon = int((p + o).max()) + 2
    # load(t) - load(t-1): +s+1 when a request starts, +1 in each later active round,
    # -(s+o) in the round after its last one. The "+1 each round" part is itself a
    # prefix sum of +1 at p+1 and -1 at p+o.
    jumps = np.zeros(horizon, dtype=np.int64)
    np.add.at(jumps, p, s + 1)
    np.add.at(jumps, p + o, -(s + o))
    ramps = np.zeros(horizon, dtype=np.int64)
    np.add.at(ramps, p + 1, 1)
    np.add.at(ramps, p + o, -1)
    load = np.cumsum(jumps + np.cumsum(ramps))
    over = load > instance.memory
    problems = []
    if over.any():
        edges = np.flatnonzero(np.diff(np.concatenate(([0], over.astype(np.int8), [0]))))
        for first, stop in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
            worst = first + int(np.argmax(load[first:stop]))
            rounds = (
                f"round {first + shift}"
                if stop - first == 1
                else (f"rounds {first + shift}..{stop - 1 + shift}")
            )
            problems.append(
                f"memory: {rounds} exceed M = {instance.memory} "
                f"(peak {int(load[worst])} tokens in round {worst + shift})"
            )
    return problems


def assert_feasible(instance: Instance, starts: StartsLike) -> None:
    """Raise :class:`~schedlab.errors.ScheduleError` listing all violations, if any."""
    problems = verify(instance, starts)
    if problems:
        raise ScheduleError("infeasible schedule: " + "; ".join(problems))
