"""Left-shift compaction: move single requests to their earliest feasible start.

Given a feasible schedule, the requests are visited by increasing start (ties by
index). Request ``i`` is taken out, every other request stays where it is, and ``i`` is
put back at the least round ``t >= a_i`` in which it fits; ``t <= p_i`` because ``p_i``
itself fits. Passes repeat until one moves nothing (or ``max_passes``, or the wall-clock
cap: it is checked between blocks of :data:`BLOCK` requests, and the schedule reached so
far is returned). No start ever increases, so the objective ``sum_i (p_i + o_i - a_i)``
never increases, and every intermediate schedule is feasible (``proofs/left_shift.md``).
The result may be one that no strict list decode produces: a request may move before
requests of higher priority into a gap they left.

Earliest fit
------------
With ``L(tau)`` the tokens the other requests hold in round ``tau``, request ``i``
started at ``t`` holds ``s_i + tau - t + 1`` tokens in rounds ``t .. t + o_i - 1``, so it
fits iff

.. math:: \\max_{t \\le \\tau \\le t + o_i - 1} \\bigl(L(\\tau) + \\tau\\bigr)
          \\le M - s_i - 1 + t .

The left side for every ``t`` in ``[a_i, p_i]`` is one sliding-window maximum of
``g(tau) = L(tau) + tau`` over ``[a_i, p_i + o_i)``
(:func:`scipy.ndimage.maximum_filter1d`, linear time), so a request costs
``O(p_i - a_i + o_i)`` array operations, a pass ``O(n * makespan)`` at most. The load
profile is updated in place after every move. That is the reference
(``engine="python"``); the default engine,
:mod:`schedlab.offline.solvers.compiled_left_shift`, finds the same round by one integer
sweep over the same range, in compiled code.

Time without idle stretches
---------------------------
Request ``i`` reads and writes the load only in rounds of ``[a_i, C_i)``: its candidate
starts lie in ``[a_i, p_i]`` and it runs ``o_i`` rounds from one of them, and a move only
shrinks the interval. So the load profile is kept only over the union of these
intervals, with the rounds between its maximal segments cut out (:func:`busy_time`):
each segment keeps its rounds in order, shifted by the length cut before it, and holds
every interval it meets whole, so the load of each of its rounds, and every comparison
of the fit test (both sides shift alike: ``g(τ) = L(τ) + τ`` against ``c + t``), are
those of the uncut time. The passes therefore make the same moves, and an instance with
one request released at round ``2^30`` needs a profile as long as its schedule's
objective at most (``sum_i (C_i - a_i)``), not ``2^30`` rounds. The profile's bytes are
checked against the memory budget before it is built (:data:`PROFILE_BYTES`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import InputError, ScheduleError
from schedlab.offline.decoder import ENGINES, decode_best, list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.schedule import PROFILE_BYTES, Schedule, load_profile

__all__ = [
    "BLOCK",
    "PROFILE_BYTES",
    "busy_time",
    "decode_compacted",
    "earliest_start",
    "left_shift",
]

#: Requests shifted between two looks at the wall-clock cap.
BLOCK = 256


def busy_time(instance: Instance, starts: np.ndarray) -> tuple[np.ndarray, int]:
    """The rounds by which each request's times move when the rounds outside every
    ``[a_i, p_i + o_i)`` are cut out (module docs, "Time without idle stretches"), and
    the length of time that is left.

    Returns
    -------
    tuple
        ``cut[i]``, to subtract from ``a_i`` and ``p_i``, and the rounds left (the end of
        the last segment in cut time).
    """
    release = instance.arrival.astype(np.int64)
    end = np.asarray(starts, dtype=np.int64) + instance.output
    order = np.argsort(release, kind="stable")
    first, last = release[order], end[order]
    reach = np.maximum.accumulate(last)  # the end of the segment so far
    new = np.ones(len(order), dtype=bool)
    new[1:] = first[1:] >= reach[:-1]  # a request after a gap opens a segment
    segment = np.cumsum(new) - 1
    begins = first[new]
    ends = np.maximum.reduceat(last, np.flatnonzero(new))
    lengths = ends - begins
    cut_begins = np.cumsum(lengths) - lengths  # where each segment begins in cut time
    cut = np.empty(len(order), dtype=np.int64)
    cut[order] = (begins - cut_begins)[segment]
    return cut, int(lengths.sum())


def earliest_start(
    load: np.ndarray, memory: int, prompt: int, output: int, release: int, latest: int
) -> int | None:
    """Least ``t`` in ``[release, latest]`` where a request ``(prompt, output)`` fits.

    ``load[tau]`` is the tokens held by the other requests in round ``tau``; it must
    cover at least the rounds ``0 .. latest + output - 1``. ``None`` when no round in
    the range fits.
    """
    rounds = np.arange(release, latest + output)
    g = load[release : latest + output] + rounds
    # window [t, t + output - 1]: origin -(output // 2) puts the window after t
    from scipy.ndimage import maximum_filter1d

    peak = maximum_filter1d(g, size=output, origin=-(output // 2), mode="nearest")
    fits = peak[: latest - release + 1] - rounds[: latest - release + 1] <= memory - prompt - 1
    if not fits.any():
        return None
    return release + int(np.argmax(fits))


def left_shift(
    instance: Instance,
    starts: np.ndarray,
    *,
    max_passes: int | None = None,
    budget: Budget = UNLIMITED,
    engine: str = "compiled",
) -> tuple[np.ndarray, dict[str, Any]]:
    """Left-shift every request of a feasible schedule until none moves (module docs).

    Parameters
    ----------
    instance
        The instance.
    starts
        A feasible schedule of it (start round of each request).
    max_passes
        Stop after this many passes (``None``: until a pass moves nothing).
    budget
        Wall-clock cap, checked every :data:`BLOCK` requests.
    engine
        ``"compiled"`` (default) or ``"python"``, the reference; same schedule.

    Returns
    -------
    tuple
        The new starts (each ``<=`` the old one) and ``{"passes", "moved", "gain",
        "stopped_by"}``: passes begun, request moves made, the objective decrease, and
        ``"time_limit"`` if the cap ended it (else ``None``).

    Raises
    ------
    ScheduleError
        If some request starts before its release or does not fit at its own start
        beside the others (``starts`` is not feasible).
    InputError
        On an unknown engine (:data:`~schedlab.offline.decoder.ENGINES`).
    """
    if engine not in ENGINES:
        raise InputError(f"left_shift: engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    schedule = Schedule(instance, starts)
    early = np.flatnonzero(schedule.starts < instance.arrival)
    if len(early):
        i = int(early[0])
        raise ScheduleError(
            f"left_shift: request {i} starts in round {int(schedule.starts[i])}, before its "
            f"release {int(instance.arrival[i])} (the schedule is infeasible)"
        )
    cut, rounds = busy_time(instance, schedule.starts)
    budget.require("left_shift", PROFILE_BYTES * rounds, f"a load profile of {rounds:,} rounds")
    # in cut time (module docs); the starts are put back in the instance's time at the end
    release = instance.arrival - cut
    new = schedule.starts.astype(np.int64) - cut  # a copy, updated in place
    load = load_profile(instance, new, 0, rounds)  # likewise
    shift = _compiled_block if engine == "compiled" else _python_block
    passes = moved = 0
    stopped = None
    while max_passes is None or passes < max_passes:
        passes += 1
        moved_now = 0
        visit = np.lexsort((np.arange(instance.n), new))
        for lo in range(0, instance.n, BLOCK):
            if budget.expired():
                stopped = "time_limit"
                break
            hi = min(lo + BLOCK, instance.n)
            moved_now += shift(instance, release, visit, lo, hi, new, load)
        moved += moved_now
        if not moved_now or stopped:
            break
    new += cut
    gain = int(schedule.starts.sum() - new.sum())
    return new, {"passes": passes, "moved": moved, "gain": gain, "stopped_by": stopped}


def decode_compacted(
    instance: Instance,
    order: np.ndarray,
    others: dict[str, np.ndarray] | None = None,
    *,
    budget: Budget = UNLIMITED,
) -> tuple[np.ndarray, dict[str, Any]]:
    """The best of ``order``'s strict and backfilling decodes, the strict one left-shifted,
    and ``others``: the searches' last step.

    Parameters
    ----------
    instance
        The instance.
    order
        A priority order of its requests.
    others
        More candidate schedules, by name.
    budget
        Wall-clock cap of the left shift (:func:`left_shift`) and of the backfilling
        decode (:func:`~schedlab.offline.decoder.decode_best`).

    Returns
    -------
    tuple
        The chosen starts and :func:`~schedlab.offline.decoder.decode_best`'s statistics
        (every candidate's objective, the name chosen, ``"strict+left-shift"`` among
        them), with ``"left_shift"``: :func:`left_shift`'s.
    """
    strict = list_schedule(instance, order)
    shifted, shift = left_shift(instance, strict, budget=budget)
    starts, stats = decode_best(
        instance,
        order,
        {"strict+left-shift": shifted, **(others or {})},
        budget=budget,
        strict=strict,
    )
    return starts, {**stats, "left_shift": shift}


def _refuse(request: int, start: int) -> ScheduleError:
    return ScheduleError(
        f"left_shift: request {request} does not fit at its start round {start} "
        "beside the others (the schedule is infeasible)"
    )


def _python_block(
    instance: Instance,
    release: np.ndarray,
    visit: np.ndarray,
    lo: int,
    hi: int,
    new: np.ndarray,
    load: np.ndarray,
) -> int:
    """Shift ``visit[lo:hi]`` in turn with :func:`earliest_start`, with releases
    ``release`` (in the time of ``new`` and ``load``); returns the moves."""
    moved = 0
    for i in visit[lo:hi].tolist():
        p, s, o = int(new[i]), int(instance.prompt[i]), int(instance.output[i])
        held = np.arange(s + 1, s + o + 1)
        load[p : p + o] -= held
        t = earliest_start(load, instance.kv_tokens, s, o, int(release[i]), p)
        if t is None:
            raise _refuse(i, p)
        load[t : t + o] += held
        if t < p:
            new[i] = t
            moved += 1
    return moved


def _compiled_block(
    instance: Instance,
    release: np.ndarray,
    visit: np.ndarray,
    lo: int,
    hi: int,
    new: np.ndarray,
    load: np.ndarray,
) -> int:
    """The same with the compiled kernel (numba loads on first use)."""
    from schedlab.offline.solvers import compiled_left_shift

    moved = compiled_left_shift.shift_requests(
        instance.prompt,
        instance.output,
        release,
        instance.kv_tokens,
        visit,
        lo,
        hi,
        new,
        load,
    )
    if moved < 0:
        request = -1 - moved
        raise _refuse(request, int(new[request]))
    return int(moved)
