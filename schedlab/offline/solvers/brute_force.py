"""Exhaustive enumeration of start rounds: the exact oracle for tiny instances.

Window argument: let ``U`` be the objective of any feasible schedule (the best
list-scheduling rule's). Every term ``C_j - a_j`` is at least ``o_j``, so in an optimal
schedule ``C_i - a_i <= OPT - sum_{j != i} o_j <= U - sum_{j != i} o_j``, that is

.. math:: a_i \\le p_i \\le a_i + U - \\sum_j o_j .

Depth-first search assigns requests in order of decreasing peak ``s_i + o_i``, trying
every start in its window with the per-round load kept in an array, and prunes a branch
when the partial objective plus ``sum of o_j`` over the unassigned requests reaches the
incumbent. It is exponential; it refuses more than :data:`MAX_REQUESTS` requests, and
instances whose search spans more than :data:`MAX_ROUNDS` rounds (``a_max + U``, the
length of the load array; the windows and the profiles grow with it).
Work unit: a search node; ``work`` (default :data:`DEFAULT_NODES`, about a minute
at the widest windows it takes) and the budget's wall-clock cap stop it early, with the
incumbent and status ``WORK_LIMIT`` or ``TIME_LIMIT``. Its memory does not grow as it
runs: one load array over the rounds searched (checked against the memory budget before
it is made) and a recursion at most ``n`` deep.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import InstanceError
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.priority import RULES, priority_order
from schedlab.offline.result import SolverOutput, Status
from schedlab.offline.solvers.contract import integer_option

__all__ = ["DEFAULT_NODES", "MAX_REQUESTS", "MAX_ROUNDS", "brute_force"]

MAX_REQUESTS = 8

#: Most rounds the search may span by default, ``a_max + U`` (``max_rounds=`` overrides
#: it). The searches of the tests and the shipped tiny instances span at most 171
#: (``jaillet_instance(11, n=8)``). Time grows about as the window ``U - sum_j o_j`` to
#: the power ``n`` (``docs/design.md``, "Decision record").
MAX_ROUNDS = 512

#: Search nodes by default (``work=``): each tries every start of its window, so a
#: node costs up to ``MAX_ROUNDS`` fit tests; sized to end within about a minute.
DEFAULT_NODES = 50_000


def brute_force(
    instance: Instance,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
    work: int | None = DEFAULT_NODES,
    max_rounds: int = MAX_ROUNDS,
) -> SolverOutput:
    """Optimal schedule by exhaustive enumeration (``n <= 8``); see the module docs.

    Returns ``OPTIMAL`` when the search finished, ``WORK_LIMIT`` (``work``) or
    ``TIME_LIMIT`` with the incumbent otherwise. Deterministic; ``seed`` is unused.

    Parameters
    ----------
    work
        The work budget: search nodes (:data:`DEFAULT_NODES`; ``None``: no limit).
    max_rounds
        The most rounds the search may span, ``a_max + U`` (``>= 1``; :data:`MAX_ROUNDS`).

    Raises
    ------
    InputError, InputTypeError
        If ``max_rounds`` is not an integer >= 1, or ``work`` not one >= 0.
    InstanceError
        If the instance has more than :data:`MAX_REQUESTS` requests or its search spans
        more than ``max_rounds`` rounds.
    """
    max_rounds = integer_option("brute-force", "max_rounds", max_rounds, "", minimum=1)
    n = instance.n
    if n > MAX_REQUESTS:
        raise InstanceError(f"brute-force: n = {n} is too large (at most {MAX_REQUESTS})")
    s = instance.prompt.tolist()
    o = instance.output.tolist()
    a = instance.arrival.tolist()
    memory = instance.kv_tokens
    # each distinct priority order decoded once, in rule order (sof, mc-sf and
    # mc-sf-backfill share one): the first least schedule is the same as over all rules
    orders: dict[bytes, np.ndarray] = {}
    for rule in RULES:
        priority = priority_order(instance, rule)
        orders.setdefault(priority.tobytes(), priority)
    incumbent = min(
        (list_schedule(instance, priority) for priority in orders.values()),
        key=lambda p: int((p + instance.output - instance.arrival).sum()),
    )
    best = [int((incumbent + instance.output - instance.arrival).sum()), incumbent.tolist()]
    rounds = max(a) + best[0]
    if rounds > max_rounds:
        raise InstanceError(
            f"brute-force: the search spans {rounds:,} rounds (latest arrival + the best "
            f"rule's objective), above max_rounds = {max_rounds:,}; use dp or cpsat, or "
            "raise max_rounds"
        )
    slack = best[0] - sum(o)
    budget.require("brute-force", 8 * (rounds + 1), f"a load array of {rounds:,} rounds")
    load = np.zeros(rounds + 1, dtype=np.int64)
    order = sorted(range(n), key=lambda i: -(s[i] + o[i]))
    rest = [sum(o[j] for j in order[k:]) for k in range(n + 1)]
    starts = [0] * n
    stop = budget.stop(work)

    def search(k: int, partial: int) -> None:
        if stop.reason is not None or partial + rest[k] >= best[0]:
            return
        if stop():
            return
        if k == n:
            best[0], best[1] = partial, list(starts)
            return
        i = order[k]
        profile = np.arange(s[i] + 1, s[i] + o[i] + 1)
        for p in range(a[i], a[i] + slack + 1):
            window = load[p : p + o[i]]
            if (window + profile).max() > memory:
                continue
            window += profile
            starts[i] = p
            search(k + 1, partial + p + o[i] - a[i])
            window -= profile

    search(0, 0)
    status = Status.OPTIMAL if stop.reason is None else Status.stopped(stop.reason)
    stats: dict[str, Any] = {"window": slack + 1, "nodes": stop.work, "stopped_by": stop.reason}
    if stop.reason == "work":
        stats["work_budget"] = {"work": work}
    return SolverOutput(np.array(best[1], dtype=np.int64), status, stats=stats)
