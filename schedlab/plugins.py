"""Third-party extensions: what installed packages declare in schedlab's entry-point groups.

Every registry of schedlab (a :class:`~schedlab.registry.Registry`) holds its built-in
entries and those added at run time by its ``register``; an installed package adds
entries to it without being imported by name, by declaring them in the registry's
entry-point group of its ``pyproject.toml``:

.. code-block:: toml

    [project.entry-points."schedlab.solvers"]
    my-solver = "my_package.solvers:MY_SOLVER"   # a schedlab.offline.solvers.SolverInfo

==============================  =========================================================
group                           each entry point names
==============================  =========================================================
``schedlab.solvers``            a :class:`~schedlab.offline.solvers.SolverInfo`
``schedlab.bounds``             a :class:`~schedlab.offline.bounds.BoundMethod`
``schedlab.policies``           a :class:`~schedlab.serving.policy_registry.PolicySpec`
``schedlab.routers``            a :class:`~schedlab.serving.routers.RouterSpec`
``schedlab.workloads``          a :class:`~schedlab.serving.workloads.WorkloadSpec`
``schedlab.cost_model_kinds``   a loader ``loader(data, where) -> CostModel``
``schedlab.profile_readers``    a :class:`~schedlab.calibration.profile_table.ProfileReader`
``schedlab.engines``            a factory of :class:`~schedlab.serving.engine_kinds.Replica`
``schedlab.prediction_models``  a :class:`~schedlab.predictions.PredictionModel`
==============================  =========================================================

The entry point's name is the registry name (for solvers and bounds it must equal the
spec's own ``name``). Names are listed without importing anything (so ``--help`` stays
fast); an entry is loaded when it is looked up, and a built-in or run-time entry of the
same name wins (an installed package cannot replace a built-in). Docs:
``docs/extending.md``.
"""

from __future__ import annotations

import functools
import sys
from importlib.metadata import EntryPoints, entry_points
from typing import Any, TypeVar

from schedlab.errors import InputError, InputTypeError

__all__ = ["declared", "installed_names", "load_installed"]

T = TypeVar("T")


@functools.cache
def _declared(path: tuple[str, ...]) -> Any:
    """Every entry point the distributions on ``path`` declare, read once: each reading
    parses every installed package's ``entry_points.txt``, and the command line asks for
    about twenty groups."""
    return entry_points()  # Python 3.11: grouped; both kinds have .select(group=, name=)


def declared(**select: str) -> EntryPoints:
    """The installed entry points that match ``select`` (``group=``, ``name=``), as
    :func:`importlib.metadata.entry_points` gives them, read once for each ``sys.path``
    (a directory added to it, as a test's installed package is, is seen)."""
    return _declared(tuple(sys.path)).select(**select)


def installed_names(group: str) -> tuple[str, ...]:
    """The names installed packages declare in entry-point ``group``, sorted, without
    loading them."""
    return tuple(sorted({point.name for point in declared(group=group)}))


def load_installed(group: str, name: str, kind: type[T]) -> T | None:
    """The ``kind`` object an installed package declares as ``name`` in ``group``
    (``None`` if none does; the first found if several do).

    Raises
    ------
    InputError
        Naming the entry point, if what it names cannot be imported (a missing module or
        attribute, or an error raised while its module is imported).
    InputTypeError
        Naming the entry point, if what it names is not a ``kind``.
    """
    for point in declared(group=group, name=name):
        try:
            found = point.load()
        except Exception as error:  # the package's own import can raise anything
            raise InputError(
                f"entry point {name!r} of group {group} ({point.value}): cannot load it: "
                f"{type(error).__name__}: {error}"
            ) from None
        if not isinstance(found, kind):
            raise InputTypeError(
                f"entry point {name!r} of group {group} ({point.value}): expected a "
                f"{kind.__name__}, got {type(found).__name__}"
            )
        return found
    return None
