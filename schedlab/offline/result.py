"""What a solver returns: :class:`Result` and its :class:`Status`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from schedlab.offline.instance import Instance
from schedlab.offline.schedule import Schedule

__all__ = ["Result", "SolverOutput", "Status", "relative_gap"]


class Status(StrEnum):
    """Outcome of a solve.

    ``OPTIMAL``: proven optimal (by the solver, or because the objective meets the
    lower bound). ``FEASIBLE``: a verified schedule without proof. ``TIME_LIMIT``: the
    time limit stopped an exact method before it proved optimality; ``WORK_LIMIT``: its
    work budget did (``stats["work_budget"]`` names the option and its value: raise it to
    go on); ``MEMORY_LIMIT``: its memory budget did. The schedule is then the best found.
    ``INFEASIBLE``: no schedule was found.
    """

    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    TIME_LIMIT = "TIME_LIMIT"
    WORK_LIMIT = "WORK_LIMIT"
    MEMORY_LIMIT = "MEMORY_LIMIT"
    INFEASIBLE = "INFEASIBLE"

    @classmethod
    def stopped(cls, reason: str) -> Status:
        """The status of an exact method stopped by ``reason`` (``stats["stopped_by"]``:
        ``"time_limit"``, ``"work"`` or ``"memory"``) before its proof."""
        return {"work": cls.WORK_LIMIT, "memory": cls.MEMORY_LIMIT}.get(reason, cls.TIME_LIMIT)


@dataclass(frozen=True)
class SolverOutput:
    """What a registered solver function hands back to :func:`schedlab.offline.solve`.

    Attributes
    ----------
    starts
        Start round of each request.
    status
        The solver's own verdict (``OPTIMAL`` only when it proved it).
    lower_bound
        A valid lower bound the solver proved on the way, if any.
    stats
        Free solver statistics (iterations, moves, nodes, ...).
    """

    starts: np.ndarray
    status: Status = Status.FEASIBLE
    lower_bound: float | None = None
    stats: dict[str, Any] = field(default_factory=dict)


def relative_gap(objective: float, lower_bound: float | None) -> float | None:
    """``(objective - bound) / bound``, ``0`` when they meet, ``None`` without a bound."""
    if lower_bound is None or lower_bound <= 0:
        return None
    return max(0.0, (objective - lower_bound) / lower_bound)


@dataclass(frozen=True)
class Result:
    """A verified schedule with its objective and certified distance to optimal.

    Attributes
    ----------
    solver
        Registry name of the solver.
    objective
        Total end-to-end latency ``sum_i (C_i - a_i)``.
    lower_bound
        Best valid lower bound on the optimum known for this solve (``None`` if none).
    gap
        ``(objective - lower_bound) / lower_bound``.
    status
        See :class:`Status`.
    runtime
        Wall seconds of the solver (bounds excluded).
    schedule
        The schedule, already checked by :func:`schedlab.offline.verify.verify`.
    stats
        Solver statistics and bound details.
    """

    solver: str
    objective: int
    lower_bound: float | None
    gap: float | None
    status: Status
    runtime: float
    schedule: Schedule
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def starts(self) -> np.ndarray:
        return self.schedule.starts

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``starts[i]`` is request i's start round)."""
        return {
            "solver": self.solver,
            "status": str(self.status),
            "objective": self.objective,
            "lower_bound": self.lower_bound,
            "gap": self.gap,
            "runtime_s": self.runtime,
            "mean_latency": self.schedule.mean_latency,
            "makespan": self.schedule.makespan,
            "peak_memory": self.schedule.peak_memory,
            "utilisation": self.schedule.utilisation,
            "starts": self.schedule.starts.tolist(),
            "stats": self.stats,
        }

    @classmethod
    def from_dict(cls, instance: Instance, data: Mapping[str, Any]) -> Result:
        """The result :meth:`to_dict` gave, its schedule rebuilt on ``instance``."""
        return cls(
            data["solver"],
            int(data["objective"]),
            data["lower_bound"],
            data["gap"],
            Status(data["status"]),
            float(data["runtime_s"]),
            Schedule(instance, data["starts"]),
            dict(data["stats"]),
        )
