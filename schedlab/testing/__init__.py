"""Property testing for one's own solvers and serving policies, in one's own CI.

============================================  ==================================================
name                                          what it is
============================================  ==================================================
:func:`instances`, :func:`traces`,            hypothesis strategies
:func:`engine_configs`, :func:`cost_models`   (:mod:`~schedlab.testing.strategies`)
:func:`check_schedule`, :func:`check_bound`   a feasible schedule and its objective; a
                                              valid lower bound
                                              (:mod:`~schedlab.testing.schedules`)
:func:`check_deadlines`                       SLOWeave's per-step deadline guarantee
                                              (:mod:`~schedlab.testing.deadlines`)
:func:`check_conservation`,                   every token and KV block accounted for
:func:`check_cluster_conservation`            (:mod:`~schedlab.testing.conservation`)
:class:`ServingRun`, :func:`record_run`       a recorded simulator run, what the serving
                                              checks take (:mod:`~schedlab.testing.runs`)
:func:`check_solver_properties`,              a whole property test of a solver or policy
:func:`check_policy_properties`               (:mod:`~schedlab.testing.properties`); the
                                              pytest fixtures ``check_solver`` and
                                              ``check_policy`` (:mod:`~schedlab.testing.plugin`)
:class:`InvariantViolation` and subclasses    what the checks raise: ``AssertionError``\\ s
                                              (:mod:`~schedlab.testing.violations`)
============================================  ==================================================

``docs/testing.md`` shows a property test of a solver and of a policy. The checks need
only schedlab; the strategies and property tests need hypothesis too (the ``test`` extra),
and are imported when first used; from then on ``st.from_type(Instance)`` and
``st.from_type(EngineConfig)`` draw them too (:mod:`~schedlab.testing.strategies`).
Importing this package costs nothing: every name is imported when first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from schedlab.testing.violations import (  # plain exceptions: nothing to wait for
    BoundViolation,
    ConservationViolation,
    DeadlineViolation,
    InvariantViolation,
    ObjectiveViolation,
    ScheduleViolation,
)

if TYPE_CHECKING:
    from schedlab.testing.conservation import check_cluster_conservation, check_conservation
    from schedlab.testing.deadlines import check_deadlines
    from schedlab.testing.properties import check_policy_properties, check_solver_properties
    from schedlab.testing.runs import ServingRun, record_run
    from schedlab.testing.schedules import check_bound, check_schedule
    from schedlab.testing.strategies import cost_models, engine_configs, instances, traces

__all__ = [
    "BoundViolation",
    "ConservationViolation",
    "DeadlineViolation",
    "InvariantViolation",
    "ObjectiveViolation",
    "ScheduleViolation",
    "ServingRun",
    "check_bound",
    "check_cluster_conservation",
    "check_conservation",
    "check_deadlines",
    "check_policy_properties",
    "check_schedule",
    "check_solver_properties",
    "cost_models",
    "engine_configs",
    "instances",
    "record_run",
    "traces",
]

#: The module of each public name, imported on first use.
_HOMES = {
    **dict.fromkeys(["check_cluster_conservation", "check_conservation"], "conservation"),
    "check_deadlines": "deadlines",
    **dict.fromkeys(["check_policy_properties", "check_solver_properties"], "properties"),
    **dict.fromkeys(["ServingRun", "record_run"], "runs"),
    **dict.fromkeys(["check_bound", "check_schedule"], "schedules"),
    **dict.fromkeys(["cost_models", "engine_configs", "instances", "traces"], "strategies"),
}


def __getattr__(name: str) -> Any:
    """A public name, imported on first use (the strategies and property tests need
    hypothesis).

    Raises
    ------
    ModuleNotFoundError
        In one line saying how to install hypothesis, if it is not installed.
    """
    if name not in _HOMES:
        raise AttributeError(f"module 'schedlab.testing' has no attribute {name!r}")
    try:
        module = import_module(f"schedlab.testing.{_HOMES[name]}")
    except ModuleNotFoundError as error:
        if error.name != "hypothesis":
            raise
        raise ModuleNotFoundError(
            f"schedlab.testing.{name} needs hypothesis, which is not installed: "
            "pip install hypothesis (or schedlab's test extra)",
            name="hypothesis",
        ) from None
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """Every public name, those imported on first use included."""
    return sorted({*globals(), *__all__})
