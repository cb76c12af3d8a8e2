"""The contract every offline solver keeps, written and checked once.

A solver is a function

.. code-block:: python

    fn(instance, *, budget: Budget = UNLIMITED, seed: int = 0, **own options) -> SolverOutput

whose own options are keyword-only parameters with defaults. So its signature is the one
list of what it accepts: :func:`accepted_options` reads it (:func:`option_specs` with
types and defaults) and :func:`check_options` refuses anything else with a
:class:`~schedlab.errors.UnknownOptionError` naming it, before the solver runs. The
solvers share one vocabulary: ``work`` is a solver's work budget, in the unit its
docstring names (moves, evaluated orders, state expansions, search nodes, cells of
Sorted-F's programme, CP-SAT's deterministic seconds; when it stopped the solver,
:func:`schedlab.solve` gives it in ``stats["work_budget"]`` wherever it is a number), and
``width`` the positions within which a move acts. Beyond the
signature, every solver

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

import contextlib
import inspect
import math
import numbers
import operator
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, Protocol, SupportsIndex, cast

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import InputError, InputTypeError, UnknownOptionError
from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput

__all__ = [
    "CONTRACT_PARAMETERS",
    "RESERVED_OPTIONS",
    "OptionSpec",
    "SolverFn",
    "accepted_options",
    "check_options",
    "integer_option",
    "option_specs",
    "parse_options",
]

#: Keyword parameters every solver takes; the rest of its signature are its own options.
CONTRACT_PARAMETERS = ("budget", "seed")

#: Names no option may have: :func:`schedlab.solve` takes them itself, so an option of
#: that name could never reach the solver.
RESERVED_OPTIONS = ("instance", "solver", "time_limit", "max_memory", "bound")


class SolverFn(Protocol):
    """A solver function (module docs)."""

    def __call__(
        self, instance: Instance, *, budget: Budget = UNLIMITED, seed: int = ...
    ) -> SolverOutput: ...


@dataclass(frozen=True)
class OptionSpec:
    """One own option of a solver, as its signature declares it.

    Attributes
    ----------
    name
        Its keyword.
    types
        The types it takes (from its annotation; empty if it names none).
    default
        Its default value.
    """

    name: str
    types: tuple[type, ...]
    default: Any

    @property
    def type_names(self) -> tuple[str, ...]:
        """The names of :attr:`types` (``"None"`` for ``NoneType``)."""
        return tuple("None" if t is NoneType else t.__name__ for t in self.types)

    def describe(self) -> str:
        """``name: type = default``, the form ``schedlab solvers`` prints."""
        kind = f": {' or '.join(self.type_names)}" if self.types else ""
        return f"{self.name}{kind} = {self.default!r}"


def option_specs(fn: Any) -> tuple[OptionSpec, ...]:
    """The own options of solver ``fn`` with their types and defaults, in signature
    order."""
    types = _option_types(fn)
    parameters = inspect.signature(fn).parameters
    return tuple(
        OptionSpec(key, types.get(key, ()), parameters[key].default)
        for key in accepted_options(fn)
    )


def accepted_options(fn: Any) -> tuple[str, ...]:
    """The own options of solver ``fn``: its keyword-only parameters but the contract's."""
    parameters = inspect.signature(fn).parameters.values()
    return tuple(
        p.name
        for p in parameters
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in CONTRACT_PARAMETERS
    )


def _option_types(fn: Any) -> dict[str, tuple[type, ...]]:
    """The types each own option of ``fn`` takes, from its annotations (``int | None``
    gives ``(int, NoneType)``); options annotated otherwise are not listed."""
    try:
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError):  # a name only imported for type checking; a partial
        return {}
    types: dict[str, tuple[type, ...]] = {}
    for key in accepted_options(fn):
        hint = hints.get(key)
        union = isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union
        members = typing.get_args(hint) if union else (hint,)
        if members and all(isinstance(m, type) for m in members):
            types[key] = members
    return types


def _type_names(allowed: tuple[type, ...]) -> str:
    return " or ".join("None" if t is NoneType else t.__name__ for t in allowed)


def _fits(value: Any, allowed: tuple[type, ...]) -> bool:
    """Whether ``value`` is of one of the ``allowed`` types; NumPy integers count as
    ``int``, integers as ``float`` (a float only when finite), and a ``bool`` only as a
    ``bool``."""
    if isinstance(value, bool | np.bool_):
        return bool in allowed
    if isinstance(value, numbers.Integral) and (int in allowed or float in allowed):
        return True
    if isinstance(value, numbers.Real) and float in allowed:
        return math.isfinite(value)  # nan would pass every comparison with a limit
    return isinstance(value, allowed)


def check_options(name: str, fn: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as a new dict, once checked: refuse options ``fn`` does not accept, and
    values of a type its annotations do not allow (:func:`_fits`).

    Raises
    ------
    UnknownOptionError
        (a ``TypeError``) naming the unknown options and listing the accepted ones.
    InputError, InputTypeError
        Naming the solver, the option, the expected type and the value given.
    """
    known = accepted_options(fn)
    unknown = [key for key in options if key not in known]
    if unknown:
        raise UnknownOptionError(name, unknown, known)
    for key, allowed in _option_types(fn).items():
        if key not in options:
            continue
        if not _fits(options[key], allowed):
            raise InputTypeError(
                f"{name}: option {key}: expected {_type_names(allowed)}, got {options[key]!r}"
            )
    return dict(options)


def integer_option(
    solver: str, key: str, value: object, also: str, minimum: int | None = None
) -> int:
    """``value`` of a solver's count option as an integer (NumPy integers too, never a
    ``bool``), for a solver called directly rather than through :func:`check_options`;
    with ``minimum``, an integer no smaller.

    Raises
    ------
    InputError, InputTypeError
        Naming the solver and the option, with what else it takes (``also``) or its
        least value (``minimum``).
    """
    number = None
    if not isinstance(value, bool):
        with contextlib.suppress(TypeError):
            number = operator.index(cast(SupportsIndex, value))
    if number is None:
        raise InputTypeError(f"{solver}: {key} must be an integer{also}, got {value!r}")
    if minimum is not None and number < minimum:
        raise InputError(f"{solver}: {key} must be >= {minimum}, got {number}")
    return number


def parse_options(name: str, fn: Any, texts: Mapping[str, str]) -> dict[str, Any]:
    """Options given as text (``--option key=value`` on the command line), each read as
    the type its annotation names: ``true``/``false``, an integer, a number, ``none``, or
    else the text itself.

    Raises
    ------
    UnknownOptionError, InputTypeError
        As :func:`check_options`, for an unknown option or a text of none of its types.
    """
    types = _option_types(fn)
    options: dict[str, Any] = {}
    for key, text in texts.items():
        options[key] = _read_value(text, types.get(key, (str,)))
    return check_options(name, fn, options)


def _read_value(text: str, allowed: tuple[type, ...]) -> Any:
    word = text.strip().lower()
    if NoneType in allowed and word in ("none", "null"):
        return None
    if bool in allowed and word in ("true", "false"):
        return word == "true"
    for kind in (int, float):
        if kind in allowed:
            try:
                return kind(text)
            except ValueError:
                pass
    return text  # a str option takes it; any other type is refused by check_options
