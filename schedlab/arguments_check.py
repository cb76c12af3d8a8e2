"""Door checks of the arguments of a public Python entry point.

A public function checks what it is given once, at its door, so that a wrong type or a
number out of its domain is a one-line :class:`~schedlab.errors.SchedlabError` naming the
argument rather than an ``AttributeError`` or ``OverflowError`` deep inside (issue 54):

* a value of the wrong type raises :class:`~schedlab.errors.InputTypeError` (a
  ``TypeError``): ``simulate: scenario: expected Scenario or None, got str 'sloweave'``;
* a number that is NaN, infinite where a finite one is needed, or out of range raises
  the caller's ``error`` (a ``ValueError``: :class:`~schedlab.errors.InputError`,
  :class:`~schedlab.errors.ServingError`, :class:`~schedlab.errors.PredictionError`):
  ``choose_chunk: state.next_deadline_s: must be a finite number, got nan``.

A ``bool`` is no number here (``True`` is an ``int`` to Python, never a count or a rate
to schedlab); NumPy's integers and floats are numbers. Seeds are integers in
``[0, MAX_SEED]``. None of these run inside a simulation's loop: a door check costs once
per call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np

from schedlab.errors import InputError, InputTypeError, SchedlabError

__all__ = [
    "MAX_COUNT",
    "MAX_SEED",
    "check_int",
    "check_int_array",
    "check_real",
    "check_seed",
    "check_type",
    "check_types",
]

#: Largest count of tokens, requests or rounds accepted at a door, ``2**40``: the bound of
#: every token count of an instance (:data:`schedlab.offline.instance.MAX_VALUE`), far
#: beyond any GPU, and small enough that sums and products stay exact in floats and
#: 64-bit integers.
MAX_COUNT = 2**40

#: Largest seed accepted, ``2**63 - 1``: a seed is written to records, tables and job
#: files as a 64-bit integer (NumPy's generators would take a longer one).
MAX_SEED = 2**63 - 1

_TYPE_NAMES = {type(None): "None", Real: "a number", Integral: "an integer", str: "a string"}


def _shown(value: Any) -> str:
    """``value`` for a message: a huge integer by its number of digits."""
    if isinstance(value, int) and abs(value) >= 10**20:
        return f"a number of {len(str(abs(value)))} digits"
    return f"{value!r:.60}"


def check_type(value: Any, types: tuple[Any, ...], where: str) -> Any:
    """``value`` if it is an instance of one of ``types`` (classes, unions, runtime
    protocols such as ``Callable``; a ``bool`` only if ``bool`` is one of them).

    Raises
    ------
    InputTypeError
        (a ``TypeError``) ``"{where}: expected {types}, got {type} {value}"``.
    """
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        expected = " or ".join(_TYPE_NAMES.get(t, getattr(t, "__name__", str(t))) for t in types)
        raise InputTypeError(
            f"{where}: expected {expected}, got {type(value).__name__} {_shown(value)}"
        )
    return value


def check_types(entry: str, **arguments: tuple[Any, tuple[Any, ...]]) -> None:
    """:func:`check_type` of each argument ``name=(value, types)`` of function ``entry``,
    named ``"{entry}: {name}"``.

    Raises
    ------
    InputTypeError
        For the first argument of none of its types.
    """
    for name, (value, types) in arguments.items():
        check_type(value, types, f"{entry}: {name}")


def check_real(
    value: Any,
    where: str,
    minimum: float = -math.inf,
    maximum: float = math.inf,
    *,
    error: type[SchedlabError] = InputError,
    above: bool = False,
) -> float:
    """``value`` as a ``float`` if it is a finite number in ``[minimum, maximum]`` (above
    ``minimum``, not at it, when ``above``).

    Raises
    ------
    InputTypeError
        For a value that is no number (a string, ``None``, a ``bool``).
    SchedlabError
        ``error`` (a ``ValueError`` subclass), for NaN, an infinity or a number out of
        range: ``"{where}: must be a finite number, got nan"``.
    """
    check_type(value, (Real,), where)
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the floats
        number = math.inf
    if not math.isfinite(number):
        raise error(f"{where}: must be a finite number, got {_shown(value)}")
    if number < minimum or (above and number == minimum):
        raise error(f"{where}: must be {'>' if above else '>='} {minimum:g}, got {_shown(value)}")
    if number > maximum:
        raise error(f"{where}: must be <= {maximum:g}, got {_shown(value)}")
    return number


def check_int(
    value: Any,
    where: str,
    minimum: int | None = None,
    maximum: int | None = None,
    *,
    error: type[SchedlabError] = InputError,
) -> int:
    """``value`` as an ``int`` if it is an integer (NumPy's too) in
    ``[minimum, maximum]`` (``None``: unbounded).

    Raises
    ------
    InputTypeError
        For a value that is no integer (``1.5``, ``"3"``, ``None``, a ``bool``).
    SchedlabError
        ``error`` (a ``ValueError`` subclass), for an integer out of range:
        ``"{where}: must be >= 0, got -1"``.
    """
    number = int(check_type(value, (Integral,), where))
    if minimum is not None and number < minimum:
        raise error(f"{where}: must be >= {minimum}, got {_shown(number)}")
    if maximum is not None and number > maximum:
        raise error(f"{where}: must be <= {maximum}, got {_shown(number)}")
    return number


def check_seed(value: Any, where: str, *, error: type[SchedlabError] = InputError) -> int:
    """``value`` as a seed: an integer in ``[0, MAX_SEED]`` (:func:`check_int`).

    Raises
    ------
    InputTypeError, SchedlabError
        As :func:`check_int`.
    """
    return check_int(value, where, 0, MAX_SEED, error=error)


def check_int_array(
    value: Any, where: str, minimum: int, maximum: int, *, error: type[SchedlabError] = InputError
) -> np.ndarray:
    """``value`` as a one-dimensional ``int64`` array if it is a sequence or array of
    integers (or of floats with integral values) in ``[minimum, maximum]``.

    Raises
    ------
    InputTypeError
        For a string, a scalar, or entries that are not integers (``"a"``, ``2.5``,
        ``True``).
    SchedlabError
        ``error`` (a ``ValueError`` subclass), for more than one dimension, NaN or an
        infinity, or an entry out of range, naming its index:
        ``"{where}[3]: must be >= 1, got 0"``.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise InputTypeError(
            f"{where}: expected a sequence of integers, got {type(value).__name__} {_shown(value)}"
        )
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # ragged nested lists
        raise InputTypeError(f"{where}: expected a sequence of integers") from None
    if array.ndim != 1:
        raise error(f"{where}: expected one dimension, got shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype.kind == "f":
        finite = np.isfinite(array)
        if not finite.all():
            i = int(np.argmin(finite))
            raise error(f"{where}[{i}]: must be a finite number, got {float(array[i])!r}")
        fractional = array != np.floor(array)
        if fractional.any():
            i = int(np.argmax(fractional))
            raise InputTypeError(f"{where}[{i}]: expected an integer, got {float(array[i])!r}")
    elif array.dtype.kind not in "iu":  # object, bool, strings: each entry checked
        for i, entry in enumerate(array.tolist()):
            check_int(entry, f"{where}[{i}]", minimum, maximum, error=error)
    low, high = int(np.argmin(array)), int(np.argmax(array))
    check_int(int(array[low]), f"{where}[{low}]", minimum, maximum, error=error)
    check_int(int(array[high]), f"{where}[{high}]", minimum, maximum, error=error)
    return array.astype(np.int64)
