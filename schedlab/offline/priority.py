"""Priority rules of list scheduling: each request's key, and the best rule's schedule.

============== ================================= ========== ==================================
name           priority (ties by request index)  mode       source
============== ================================= ========== ==================================
fcfs           release round ``a_i``             strict     standard baseline
sof            output length ``o_i``             strict     shortest-output-first baseline
total-size     ``s_i + o_i``                     strict     baseline of Wang, Ye, Zhou (2508.06133)
svf            ``s_i o_i + o_i(o_i+1)/2``        strict     Kong, Qi, Ye, Zhou (arXiv 2606.22327)
mc-sf          output length ``o_i``             strict     Jaillet et al. (arXiv 2502.07115)
mc-sf-backfill output length ``o_i``             backfill   ours: MC-SF without its stop
============== ================================= ========== ==================================

*strict*: the first released request in priority order that does not fit blocks the others
until the next event. *backfill*: every released request that fits starts, in priority
order. Every rule uses the engine's admission test, which is Jaillet et al.'s: the running
set stays within memory at every future completion round. MC-SF admits the waiting requests
by increasing ``o`` *while* that test passes and stops at the first that fails
(``docs/design.md``, "Offline algorithms"; the ``break`` in ``MC-SF_synthetic.py`` of the
code published with the paper, github.com/anonymouspeople111/neurips2025-code), so
``mc-sf`` and ``sof`` compute the same schedule: both names are kept, one for the paper's
algorithm and one for the classic baseline. ``mc-sf-backfill`` skips a request that does
not fit and tries the later ones; with equal prompts the two coincide (the slack is
non-increasing in ``o``), with mixed prompts backfilling is usually better on LLM backlogs
and worse on Jaillet's synthetic protocol (``benchmarks/jaillet_synthetic.py``). Each rule
accepts ``backfill=`` to override its mode.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance

__all__ = ["RULES", "best_rule_schedule", "priority_order", "rule_schedule"]

#: name -> (priority key of each request, default backfill)
RULES: dict[str, tuple[Callable[[Instance], np.ndarray], bool]] = {
    "fcfs": (lambda inst: inst.arrival, False),
    "sof": (lambda inst: inst.output, False),
    "total-size": (lambda inst: inst.prompt + inst.output, False),
    "svf": (lambda inst: inst.volume, False),
    "mc-sf": (lambda inst: inst.output, False),
    "mc-sf-backfill": (lambda inst: inst.output, True),
}


def priority_order(instance: Instance, rule: str) -> np.ndarray:
    """Request indices by increasing key of ``rule``, ties broken by index."""
    key, _ = RULES[rule]
    return np.lexsort((np.arange(instance.n), key(instance)))


def rule_schedule(instance: Instance, rule: str, *, engine: str = "compiled") -> np.ndarray:
    """The starts of ``rule``'s list schedule, in its own mode (strict or backfilling),
    decoded by ``engine`` (:func:`~schedlab.offline.decoder.list_schedule`: the same
    starts either way)."""
    _, backfill = RULES[rule]
    order = priority_order(instance, rule)
    return list_schedule(instance, order, backfill=backfill, engine=engine)


def best_rule_schedule(instance: Instance, budget: Budget = UNLIMITED) -> tuple[np.ndarray, str]:
    """The least-objective schedule over every list-scheduling rule, strict and backfill.

    The decoder is deterministic, so a ``(priority order, backfill)`` pair already decoded
    (``sof``, ``mc-sf`` and ``mc-sf-backfill`` share one order; other rules may coincide
    on a given instance) is skipped; ties keep the first rule of :data:`RULES`, strict
    before backfilling. The strict decodes run first: a backfilling one can take far
    longer (``benchmarks/list_scheduling_speed.py --backfill``), so once ``budget``'s cap
    has passed the decodes left are those, and the best schedule decoded so far is
    returned (at least the first rule's strict one).
    """
    best: tuple[tuple[int, int, bool], np.ndarray, str] | None = None
    decoded: set[tuple[bytes, bool]] = set()
    for backfill, (index, rule) in itertools.product((False, True), enumerate(RULES)):
        order = priority_order(instance, rule)
        if (order.tobytes(), backfill) in decoded:
            continue
        if best is not None and budget.expired():
            break
        decoded.add((order.tobytes(), backfill))
        starts = list_schedule(instance, order, backfill=backfill)
        key = (int((starts + instance.output).sum()), index, backfill)
        if best is None or key < best[0]:
            best = (key, starts, f"{rule}{'+backfill' if backfill else ''}")
    assert best is not None
    return best[1], best[2]
