"""One registry type: the named entries of one kind that schedlab looks up by name.

Solvers, bounds, policies, routers, workloads, cost-model kinds, profile readers, engine
kinds and prediction models are each one :class:`Registry`. An entry comes from one of
three places, and is found the same way whatever its place:

* built in: given when the registry is made; it cannot be unregistered;
* registered at run time: :meth:`Registry.register` (and :meth:`Registry.unregister`,
  or :meth:`Registry.temporarily` for a test);
* installed: another package declares it in the registry's entry-point group
  (:mod:`schedlab.plugins`); it is loaded when first looked up, and a built-in or
  registered entry of the same name wins.

Every registry checks an entry the same way wherever it comes from (its ``check``), so an
installed entry is held to what :meth:`~Registry.register` demands. A name nobody knows
raises :class:`~schedlab.errors.UnknownNameError` listing the known names; a name that
cannot be registered, :class:`~schedlab.errors.RegistrationError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from schedlab.errors import InputTypeError, RegistrationError, UnknownNameError
from schedlab.plugins import installed_names, load_installed

__all__ = ["Registry"]

T = TypeVar("T")


def _no_check(name: str, entry: Any) -> None:
    """Accept every entry of the right type."""


class Registry(Generic[T]):
    """The entries of one kind, by name (module docstring).

    Parameters
    ----------
    kind
        What an entry is, for messages (``"solver"``, ``"profile format"``).
    entry_type
        The type every entry must have (checked with :func:`isinstance`;
        ``collections.abc.Callable`` for a plain function).
    group
        The entry-point group of installed entries (``"schedlab.solvers"``).
    builtins
        The built-in entries, ``(name, entry)`` in the order they are listed.
    check
        ``check(name, entry)``: raises a :class:`~schedlab.errors.SchedlabError` for an
        entry of the right type that this registry still refuses (a solver whose own
        name differs, an option that clashes); called for every entry registered or
        installed.
    reserved
        Names no entry may take (``best``, which the bounds compute themselves).
    named
        Whether an entry carries its own ``name``, which must be the one it is
        registered (or installed) under.
    """

    def __init__(
        self,
        kind: str,
        entry_type: Any,
        group: str,
        builtins: Iterable[tuple[str, T]] = (),
        *,
        check: Callable[[str, T], None] = _no_check,
        reserved: tuple[str, ...] = (),
        named: bool = False,
    ) -> None:
        self.kind = kind
        self.entry_type = entry_type
        self.group = group
        self.reserved = reserved
        self.named = named
        self._check = check
        self._entries: dict[str, T] = {}
        for name, entry in builtins:
            self._add(name, entry)
        self._builtin = frozenset(self._entries)

    def _add(self, name: str, entry: T) -> None:
        if not isinstance(name, str):
            raise InputTypeError(f"{self.kind} name: expected a string, got {name!r}")
        if not name.strip() or ":" in name or name in self.reserved:
            raise RegistrationError(f"{self.kind} name {name!r}: cannot be registered")
        if name in self._entries:
            raise RegistrationError(f"{self.kind} {name!r} is already registered")
        self._checked(name, entry)
        self._entries[name] = entry

    def _checked(self, name: str, entry: T) -> None:
        """Refuse an entry not of :attr:`entry_type`, or one ``check`` refuses."""
        if not isinstance(entry, self.entry_type):
            raise InputTypeError(
                f"{self.kind} {name!r}: expected a {_type_name(self.entry_type)}, "
                f"got {type(entry).__name__}"
            )
        own = getattr(entry, "name", name) if self.named else name
        if own != name:
            raise InputTypeError(f"{self.kind} {name!r}: the entry names {self.kind} {own!r}")
        self._check(name, entry)

    def register(self, name: str, entry: T) -> None:
        """Add ``entry`` under ``name``.

        Raises
        ------
        RegistrationError
            If the name is empty, holds ``':'``, is reserved or taken.
        InputTypeError
            (a ``TypeError``) for a name that is no string or an entry not of
            :attr:`entry_type`; and whatever :attr:`check` raises.
        """
        self._add(name, entry)

    def unregister(self, name: str) -> T:
        """Remove the entry registered under ``name`` and return it.

        Raises
        ------
        RegistrationError
            For a built-in entry.
        UnknownNameError
            If nothing was registered under ``name`` (an installed entry is removed by
            uninstalling its package).
        """
        if name in self._builtin:
            raise RegistrationError(f"{self.kind} {name!r} is built in: it stays")
        if name not in self._entries:
            raise UnknownNameError(f"registered {self.kind}", name, self.registered())
        return self._entries.pop(name)

    @contextmanager
    def temporarily(self, name: str, entry: T, *, replace: bool = False) -> Iterator[T]:
        """``entry`` under ``name`` while the ``with`` block runs, then the registry as
        it was; with ``replace``, ``entry`` stands in for the entry (built-in or
        registered) already under ``name``, in its place. For tests.

        Raises
        ------
        UnknownNameError
            With ``replace``, if no built-in or registered entry has the name.
        """
        if not replace:
            self.register(name, entry)
            try:
                yield entry
            finally:
                self._entries.pop(name, None)  # (the block may have unregistered it)
            return
        if name not in self._entries:
            raise UnknownNameError(self.kind, name, tuple(self._entries))
        self._checked(name, entry)
        before, self._entries[name] = self._entries[name], entry
        try:
            yield entry
        finally:
            self._entries[name] = before

    def names(self) -> tuple[str, ...]:
        """Every known name: built-in and registered in order, then the installed ones
        (sorted) that neither shadows nor a reserved name forbids, found without loading
        them."""
        taken = (*self._entries, *self.reserved)
        installed = (name for name in installed_names(self.group) if name not in taken)
        return (*self._entries, *installed)

    def registered(self) -> tuple[str, ...]:
        """The names registered at run time (not built in, not installed)."""
        return tuple(name for name in self._entries if name not in self._builtin)

    def entries(self) -> dict[str, T]:
        """The built-in and registered entries by name, in order (installed ones are
        loaded only when looked up: :meth:`get`)."""
        return dict(self._entries)

    def get(self, name: str) -> T:
        """The entry under ``name``: built-in, registered, or installed (loaded and
        checked).

        Raises
        ------
        UnknownNameError
            (a ``ValueError``) listing the known names.
        InputError, InputTypeError
            For an installed entry that cannot be loaded, is of the wrong type, or that
            :attr:`check` refuses; each names the entry point.
        """
        if name in self._entries:
            return self._entries[name]
        found = None
        if isinstance(name, str) and name not in self.reserved:
            found = load_installed(self.group, name, self.entry_type)
        if found is None:
            raise UnknownNameError(self.kind, str(name), self.names())
        self._checked(name, found)
        return found

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (
            name in self._entries
            or (name not in self.reserved and name in installed_names(self.group))
        )

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} entries, group {self.group!r})"


def _type_name(entry_type: Any) -> str:
    if isinstance(entry_type, tuple):
        return " or ".join(_type_name(one) for one in entry_type)
    name = getattr(entry_type, "__name__", str(entry_type))
    return "callable" if name == "Callable" else name
