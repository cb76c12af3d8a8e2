"""The independent schedule verifier (``docs/design.md``, "Offline model").

It shares no code with any solver, the list-scheduling engine or
:mod:`schedlab.offline.schedule`: it recomputes the memory load its own way (a sweep over the
rounds where requests start or end, in exact integers) so that a bug in one place
cannot hide in both.

Checked, and reported in words:

* every request appears exactly once (for the pair form of a schedule),
* starts are integers with ``p_i >= a_i`` (release),
* in every round ``t`` the active requests hold at most ``M`` tokens, where request ``i``
  holds ``s_i + (t - p_i + 1)`` tokens in rounds ``p_i .. p_i + o_i - 1``.

An integer array of one start per request is first checked by the same sweep in
``int64`` NumPy (:func:`_array_is_feasible`, used only where no sum can overflow); if
that finds nothing wrong the schedule is feasible, and otherwise the exact sweep below
describes every violation. So ``10^6`` requests take about a second, not ten.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from schedlab.errors import ScheduleError
from schedlab.offline.instance import Instance, check_instance

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
    check_instance(instance, "verify")
    if isinstance(starts, str | bytes) or not isinstance(starts, Iterable | np.ndarray):
        raise ScheduleError(
            f"starts: expected a sequence of start rounds or of (request, start) pairs, "
            f"got {type(starts).__name__}"
        )
    if isinstance(starts, np.ndarray) and starts.ndim != 1:
        raise ScheduleError(f"starts: expected one start a request, got shape {starts.shape}")
    n = instance.n
    if isinstance(starts, np.ndarray) and _array_is_feasible(instance, starts):
        return []
    problems: list[str] = []
    chosen: dict[int, int] = {}
    malformed: set[int] = set()
    for request, start in _as_pairs(starts):
        i = _integer(request)
        if i is None or not 0 <= i < n:
            problems.append(f"unknown request {request!r} (the instance has requests 0..{n - 1})")
            continue
        p = _integer(start)
        if p is None:
            problems.append(f"request {i}: start must be an integer round, got {start!r}")
            malformed.add(i)
            continue
        if i in chosen:
            problems.append(f"request {i}: scheduled more than once (rounds {chosen[i]} and {p})")
            continue
        chosen[i] = p
    missing = [i for i in range(n) if i not in chosen and i not in malformed]
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


def _array_is_feasible(instance: Instance, starts: np.ndarray) -> bool:
    """Whether ``starts`` (one integer per request) is certainly feasible: releases and the
    sweep of :func:`_memory_violations` in ``int64``. ``False`` also when the array is not
    of that form or a load could exceed ``2^62`` (the exact sweep then decides)."""
    if starts.shape != (instance.n,) or starts.dtype.kind not in "iu":
        return False
    p = starts.astype(np.int64)
    prompt, output, memory = instance.prompt, instance.output, instance.kv_tokens
    scale = int(np.abs(p).max()) + int(prompt.max()) + int(output.max()) + 2
    if instance.n * scale >= 2**62 or (p < instance.arrival).any():
        return False
    rounds = np.concatenate([p, p + output])
    order = np.argsort(rounds, kind="stable")
    rounds = rounds[order]
    offset = prompt - p + 1
    count_step = np.concatenate([np.ones_like(p), -np.ones_like(p)])[order]
    weight_step = np.concatenate([offset, -offset])[order]
    first = np.flatnonzero(np.diff(rounds, prepend=rounds[0] - 1))  # first event of a round
    count = np.cumsum(np.add.reduceat(count_step, first))
    weight = np.cumsum(np.add.reduceat(weight_step, first))
    here = rounds[first]
    last = np.append(here[1:], here[-1] + 1) - 1  # the last round before the next change
    # load(tau) = weight + tau * count rises within a stretch: its last round is the peak
    return bool(((count == 0) | (weight + last * count <= memory)).all())


def _memory_violations(instance: Instance, chosen: dict[int, int]) -> list[str]:
    # Sweep the rounds where requests start or end. Between two such rounds the same
    # requests run and each adds one token a round, so the load is largest in the last
    # round of the stretch and the rounds over M form a suffix of it. Python integers:
    # exact for any magnitude, and memory linear in n whatever the start rounds.
    change: dict[int, list[int]] = {}  # round -> [change in count, change in s - p + 1]
    for i, p in chosen.items():
        request = instance.requests[i]
        offset = request.prompt - p + 1
        for round_, sign in ((p, 1), (p + request.output, -1)):
            entry = change.setdefault(round_, [0, 0])
            entry[0] += sign
            entry[1] += sign * offset
    rounds = sorted(change)
    memory = instance.kv_tokens
    spans: list[list[int]] = []  # [first over, last over, peak, peak round]
    count = weight = 0
    for here, after in pairwise(rounds):
        count += change[here][0]
        weight += change[here][1]
        last = after - 1
        peak = weight + last * count  # load(tau) = sum of (s - p + 1 + tau) over running
        if count == 0 or peak <= memory:
            continue
        first = max(here, (memory - weight) // count + 1)  # first round with load > M
        if spans and spans[-1][1] == first - 1:
            spans[-1][1] = last
            if peak > spans[-1][2]:
                spans[-1][2:] = [peak, last]
        else:
            spans.append([first, last, peak, last])
    problems = []
    for first, last, peak, at in spans:
        rounds_text = f"round {first}" if first == last else f"rounds {first}..{last}"
        problems.append(
            f"memory: {rounds_text} exceed M = {memory} (peak {peak} tokens in round {at})"
        )
    return problems


def assert_feasible(instance: Instance, starts: StartsLike) -> None:
    """Raise :class:`~schedlab.errors.ScheduleError` listing all violations, if any."""
    problems = verify(instance, starts)
    if problems:
        raise ScheduleError("infeasible schedule: " + "; ".join(problems))
