"""List-scheduling rules: a priority order decoded by the list-scheduling engine.

========== ================================= ========== ======================================
name       priority (ties by request index)  mode       source
========== ================================= ========== ======================================
fcfs       release round ``a_i``             strict     standard baseline
sof        output length ``o_i``             strict     shortest-output-first baseline
total-size ``s_i + o_i``                     strict     baseline of Wang, Ye, Zhou (2508.06133)
svf        ``s_i o_i + o_i(o_i+1)/2``        strict     Kong, Qi, Ye, Zhou (arXiv 2606.22327)
mc-sf      output length ``o_i``             backfill   Jaillet et al. (arXiv 2502.07115)
========== ================================= ========== ======================================

*strict*: the first released request in priority order that does not fit blocks the
others until the next event. *backfill*: every released request that fits starts, in
priority order. MC-SF is shortest-first with Jaillet et al.'s admission test (memory
feasible at every future completion round) applied to each waiting request in order of
increasing ``o``; the engine applies the same test to every rule, so ``sof`` differs
from ``mc-sf`` only in not backfilling. Each rule accepts ``backfill=`` to override
its mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from schedlab.instance import Instance
from schedlab.list_scheduling import list_schedule
from schedlab.result import SolverOutput
from schedlab.solvers import register_solver

__all__ = ["RULES", "priority_order"]

#: name -> (priority key of each request, default backfill)
RULES: dict[str, tuple[Callable[[Instance], np.ndarray], bool]] = {
    "fcfs": (lambda inst: inst.arrival, False),
    "sof": (lambda inst: inst.output, False),
    "total-size": (lambda inst: inst.prompt + inst.output, False),
    "svf": (lambda inst: inst.volume, False),
    "mc-sf": (lambda inst: inst.output, True),
}


def priority_order(instance: Instance, rule: str) -> np.ndarray:
    """Request indices by increasing key of ``rule``, ties broken by index."""
    key, _ = RULES[rule]
    return np.lexsort((np.arange(instance.n), key(instance)))


def _make(rule: str) -> None:
    default_backfill = RULES[rule][1]

    @register_solver(rule)
    def solve_rule(
        instance: Instance,
        *,
        time_limit: float | None = None,
        seed: int = 0,
        backfill: bool = default_backfill,
        **options: Any,
    ) -> SolverOutput:
        if options:
            raise TypeError(f"{rule}: unknown option(s) {', '.join(sorted(options))}")
        starts = list_schedule(instance, priority_order(instance, rule), backfill=backfill)
        return SolverOutput(starts, stats={"backfill": backfill})

    solve_rule.__doc__ = f"List scheduling by the {rule!r} rule (see module docs)."


for _rule in RULES:
    _make(_rule)
