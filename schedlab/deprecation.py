"""Old names kept for a while: the one way schedlab renames a keyword or an attribute.

A renamed keyword stays accepted, with a :class:`DeprecationWarning` naming its new
name (:func:`renamed`); a renamed attribute stays readable the same way
(:func:`renamed_attribute`). Giving a value under both names is refused: one of the
two would be silently dropped. The command line's renamed options are in
:mod:`schedlab.cli.arguments` and print one line on stderr instead.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from schedlab.errors import InputError

__all__ = [
    "renamed",
    "renamed_attribute",
    "renamed_keywords",
    "renamed_module_attributes",
    "warn_renamed",
]

T = TypeVar("T")


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is a deprecated name of ``new`` (a :class:`DeprecationWarning`
    attributed to the caller's caller, ``stacklevel`` frames up)."""
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=stacklevel + 1)


def renamed(where: str, old: str, new: str, old_value: T | None, new_value: T | None) -> T | None:
    """The value of a keyword renamed from ``old`` to ``new``: ``new_value``, or
    ``old_value`` with a warning if it was given under its old name (``None``: not given).

    Raises
    ------
    InputError
        If both were given, naming ``where`` (the function).
    """
    if old_value is None:
        return new_value
    if new_value is not None:
        raise InputError(f"{where}: give {new} only ({old} is its deprecated name)")
    warn_renamed(f"{where}({old}=...)", f"{new}=...", stacklevel=3)
    return old_value


def renamed_keywords(
    where: str, names: Mapping[str, str], given: dict[str, Any], stacklevel: int = 3
) -> dict[str, Any]:
    """``given`` keywords with each old name of ``names`` (``{old: new}``) replaced by
    its new one, with a warning for each; for a function taking ``**keywords`` whose
    options were renamed.

    Raises
    ------
    InputError
        If an option was given under both names, naming ``where``.
    """
    result = dict(given)
    for old, new in names.items():
        if old not in result:
            continue
        if new in result:
            raise InputError(f"{where}: give {new} only ({old} is its deprecated name)")
        warn_renamed(f"{where}: {old}", new, stacklevel=stacklevel)
        result[new] = result.pop(old)
    return result


def renamed_attribute(old: str, new: str) -> property:
    """A read-only property ``old`` giving attribute ``new``, with a warning."""

    def get(self: Any) -> Any:
        warn_renamed(f"{type(self).__name__}.{old}", f"{type(self).__name__}.{new}", 2)
        return getattr(self, new)

    return property(get, doc=f"Deprecated name of :attr:`{new}`.")


def renamed_module_attributes(module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` giving each old attribute name of ``names`` (``{old:
    new}``) of ``module`` as its new one, with a warning."""

    def get(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_renamed(f"{module}.{name}", f"{module}.{names[name]}", 2)
        return getattr(sys.modules[module], names[name])

    return get
