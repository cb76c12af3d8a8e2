"""The contract every offline solver keeps, written and checked once.

A solver is a function

.. code-block:: python

    fn(instance, *, budget: Budget = UNLIMITED, seed: int = 0, **own options) -> SolverOutput

whose own options are keyword-only parameters with defaults. So its signature is the one
list of what it accepts: :func:`accepted_options` reads it and :func:`check_options`
refuses anything else with a :class:`~schedlab.errors.UnknownOptionError` naming it,
before the solver runs. Beyond the signature, every solver

* returns start rounds that the independent verifier accepts, whose objective
  :func:`schedlab.solve` recomputes;
* is deterministic: the same instance, options and seed give the same schedule, because
  its work is counted in its own units with defaults fixed in advance
  (:mod:`schedlab.budget`); only a binding wall-clock cap may change that, and then it
  says so in ``stats["stopped_by"]``;
* returns ``Status.OPTIMAL`` only when it has proved it (exact solvers), and a
  ``lower_bound`` only when it is valid.

``tests/offline/solvers/test_contract.py`` checks all of this on every registered solver.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Protocol

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import UnknownOptionError
from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput

__all__ = ["CONTRACT_PARAMETERS", "SolverFn", "accepted_options", "check_options"]

#: Keyword parameters every solver takes; the rest of its signature are its own options.
CONTRACT_PARAMETERS = ("budget", "seed")


class SolverFn(Protocol):
    """A solver function (module docs)."""

    def __call__(
        self, instance: Instance, *, budget: Budget = UNLIMITED, seed: int = ...
    ) -> SolverOutput: ...


def accepted_options(fn: Any) -> tuple[str, ...]:
    """The own options of solver ``fn``: its keyword-only parameters but the contract's."""
    parameters = inspect.signature(fn).parameters.values()
    return tuple(
        p.name
        for p in parameters
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in CONTRACT_PARAMETERS
    )


def check_options(name: str, fn: Any, options: Mapping[str, Any]) -> None:
    """Refuse options ``fn`` does not accept.

    Raises
    ------
    UnknownOptionError
        (a ``TypeError``) naming the unknown options and listing the accepted ones.
    """
    known = accepted_options(fn)
    unknown = [key for key in options if key not in known]
    if unknown:
        raise UnknownOptionError(name, unknown, known)
