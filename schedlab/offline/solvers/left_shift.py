"""Left-shift compaction: move single requests to their earliest feasible start.

Given a feasible schedule, the requests are visited by increasing start (ties by
index). Request ``i`` is taken out, every other request stays where it is, and ``i`` is
put back at the least round ``t >= a_i`` in which it fits; ``t <= p_i`` because ``p_i``
itself fits. Passes repeat until one moves nothing (or ``max_passes``). No start ever
increases, so the objective ``sum_i (p_i + o_i - a_i)`` never increases, and every
intermediate schedule is feasible (``proofs/left_shift.md``). The result may be one that
no strict list decode produces: a request may move before requests of higher priority
into a gap they left.

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
profile comes from :attr:`schedlab.offline.schedule.Schedule.memory_profile` and is updated in
place after every move.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from schedlab.errors import ScheduleError
from schedlab.offline.instance import Instance
from schedlab.offline.schedule import Schedule

__all__ = ["earliest_start", "left_shift"]


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
    instance: Instance, starts: np.ndarray, *, max_passes: int | None = None
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

    Returns
    -------
    tuple
        The new starts (each ``<=`` the old one) and ``{"passes", "moved", "gain"}``:
        passes made, request moves made, and the objective decrease.

    Raises
    ------
    ScheduleError
        If some request does not fit at its own start beside the others (``starts``
        is not feasible).
    """
    schedule = Schedule(instance, starts)
    new = schedule.starts.copy()
    memory = instance.memory
    prompt, output = instance.prompt.tolist(), instance.output.tolist()
    arrival = instance.arrival.tolist()
    load = schedule.memory_profile.astype(np.int64)  # a copy, updated in place
    passes = moved = 0
    while max_passes is None or passes < max_passes:
        passes += 1
        moved_now = 0
        for i in np.lexsort((np.arange(instance.n), new)).tolist():
            p, s, o = int(new[i]), prompt[i], output[i]
            held = np.arange(s + 1, s + o + 1)
            load[p : p + o] -= held
            t = earliest_start(load, memory, s, o, arrival[i], p)
            if t is None:
                raise ScheduleError(
                    f"left_shift: request {i} does not fit at its start round {p} "
                    "beside the others (the schedule is infeasible)"
                )
            load[t : t + o] += held
            if t < p:
                new[i] = t
                moved_now += 1
        moved += moved_now
        if not moved_now:
            break
    gain = int(schedule.starts.sum() - new.sum())
    return new, {"passes": passes, "moved": moved, "gain": gain}
