"""Solver registry: a plain dict from name to solver function.

A solver function has the signature::

    fn(instance, *, time_limit: float | None, seed: int, **options) -> SolverOutput

and is added with :func:`register_solver`. :func:`schedlab.offline.solve` looks names up here.
Solver modules register themselves on import; :func:`_load_builtin` imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput

__all__ = ["SOLVERS", "SolverFn", "register_solver"]


class SolverFn(Protocol):
    def __call__(
        self, instance: Instance, *, time_limit: float | None, seed: int, **options: Any
    ) -> SolverOutput: ...


SOLVERS: dict[str, SolverFn] = {}


def register_solver(name: str) -> Callable[[SolverFn], SolverFn]:
    """Decorator that registers ``fn`` under ``name`` (names are unique)."""

    def decorate(fn: SolverFn) -> SolverFn:
        if name in SOLVERS:
            raise ValueError(f"solver {name!r} is registered twice")
        SOLVERS[name] = fn
        return fn

    return decorate
