"""The online policies as solvers: each plays the instance with predicted lengths.

A solver of :mod:`schedlab.offline.online.policies` draws the intervals its option
``predictions`` names (a spec of :func:`schedlab.predictions.predict`, default
``perfect``, the solver's ``seed`` when the spec names none; or a prediction file,
``.csv`` or ``.json``, read by :func:`schedlab.predictions.read_predictions`), runs the
policy on them with :func:`~schedlab.offline.online.engine.run_online`, checks the runs
with the independent :func:`~schedlab.offline.online.runs.verify_runs`, and returns the
start of each request's last run: a schedule without eviction of the same objective
(``proofs/hindsight.md``), which :func:`schedlab.solve` verifies and bounds like any
other. ``stats`` holds the runs (``[[start, rounds], ...]`` per request), the number of
evictions and the rounds and token-rounds they wasted. Deterministic; the budget never
binds.
"""

from __future__ import annotations

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import SolverError
from schedlab.offline.instance import Instance
from schedlab.offline.online.engine import run_online
from schedlab.offline.online.policies import POLICIES
from schedlab.offline.online.runs import (
    evictions,
    last_starts,
    run_schedule,
    runs_to_lists,
    verify_runs,
    wasted_rounds,
    wasted_token_rounds,
)
from schedlab.offline.result import SolverOutput
from schedlab.offline.solvers.contract import SolverFn
from schedlab.predictions import predict, read_predictions

__all__ = ["ONLINE_SOLVERS", "online_solver"]


def online_solver(name: str) -> SolverFn:
    """The solver of the online policy ``name`` (a key of
    :data:`~schedlab.offline.online.policies.POLICIES`)."""
    make = POLICIES[name]

    def solve_online(
        instance: Instance,
        *,
        budget: Budget = UNLIMITED,
        seed: int = 0,
        predictions: str = "perfect",
    ) -> SolverOutput:
        if predictions.endswith((".csv", ".json")):
            intervals = read_predictions(predictions, instance)
        else:
            intervals = predict(predictions, instance.output, seed, where=f"{name}: predictions")
        runs = run_online(instance, intervals, make())
        problems = verify_runs(instance, runs)
        if problems:
            raise SolverError(f"{name}: the verifier rejects its runs: {'; '.join(problems)}")
        held = run_schedule(instance, runs)
        stats = {
            "predictions": intervals.model,
            "peak_memory": held.peak_memory,
            "utilisation": held.utilisation,
            "evictions": evictions(runs),
            "wasted_rounds": wasted_rounds(runs),
            "wasted_token_rounds": wasted_token_rounds(instance, runs),
            "runs": runs_to_lists(runs),
        }
        return SolverOutput(last_starts(runs), stats=stats)

    solve_online.__name__ = f"solve_{name.replace('-', '_')}"
    solve_online.__doc__ = f"The online policy {name!r} (see schedlab.offline.online.policies)."
    return solve_online


#: One solver per online policy, by name.
ONLINE_SOLVERS: dict[str, SolverFn] = {name: online_solver(name) for name in POLICIES}
