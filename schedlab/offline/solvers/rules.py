"""The list-scheduling rules as solvers: a priority order decoded by the decoder.

The rules themselves (their priority keys, modes and sources) are defined in
:mod:`schedlab.offline.priority`; each becomes a solver here, taking ``backfill=`` to
override its mode. Deterministic: ``seed`` is unused and the budget never binds.
"""

from __future__ import annotations

from schedlab.budget import UNLIMITED, Budget
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.priority import RULES, priority_order
from schedlab.offline.result import SolverOutput
from schedlab.offline.solvers.contract import SolverFn

__all__ = ["RULE_SOLVERS", "rule_solver"]


def rule_solver(rule: str) -> SolverFn:
    """The solver of the list-scheduling rule ``rule`` (a name of :data:`RULES`)."""
    default_backfill = RULES[rule][1]

    def solve_rule(
        instance: Instance,
        *,
        budget: Budget = UNLIMITED,
        seed: int = 0,
        backfill: bool = default_backfill,
    ) -> SolverOutput:
        starts = list_schedule(instance, priority_order(instance, rule), backfill=backfill)
        return SolverOutput(starts, stats={"backfill": backfill})

    solve_rule.__name__ = f"solve_{rule.replace('-', '_')}"
    solve_rule.__doc__ = f"List scheduling by the {rule!r} rule (see schedlab.offline.priority)."
    return solve_rule


#: One solver per rule, by rule name.
RULE_SOLVERS: dict[str, SolverFn] = {rule: rule_solver(rule) for rule in RULES}
