"""The files a command reads and writes: declared once with its options, checked once
before it runs, so that no output of any command can overwrite one of its inputs.

Each subcommand's parser declares, by argument, which arguments name files it reads
(``reads``) and which name files it writes (``writes``): :func:`declare_files`. Before
the command runs, :func:`check_files` resolves both (a name such as a built-in workload
or a shipped cost model resolves to the file it stands for, through ``resolve``) and
refuses, in one line:

* an output that is an existing input file, compared by identity (device and inode), so
  by any spelling of its path and through symbolic or hard links; a folder read (a
  profile, a model folder) counts every file under it, through links to folders, unless
  ``resolve`` names the files read there; a file given as standard input (``-``) counts
  as the file it is;
* two outputs naming the same file (by real path, or identity where it exists).

The inputs are looked for only when an output already exists, so a run writing new files
walks no folder.

A folder output (``compare -o DIR``) writes the files ``folders[dest](DIR)`` names, each
checked as an output. ``tests/cli/test_files.py`` walks every subcommand's options and
checks that each that names a file is declared, and tries each output onto each input.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import stat
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from schedlab.errors import DataNotFoundError, InputError

__all__ = [
    "CommandFiles",
    "Identity",
    "check_files",
    "cost_model_files",
    "declare_files",
    "identity",
    "profiles_of_data_dir",
    "stdin_identity",
]

#: ``resolve[dest](value, args)``: the files or folders an argument's value stands for
#: (none, e.g. for a built-in workload); ``value`` is ``None`` where the argument was not
#: given, for the files its default stands for (the data directory).
Resolver = Callable[[str | None, argparse.Namespace], Sequence[Path]]

#: ``folders[dest](folder)``: the files a command writes in the output folder ``folder``.
FolderFiles = Callable[[Path], Sequence[Path]]


@dataclasses.dataclass(frozen=True)
class CommandFiles:
    """The file arguments of one command, by attribute name (``dest``).

    Attributes
    ----------
    reads, writes
        The arguments that name files (or folders) read, and files (or folders) written;
        an argument may be both (``--results``, a log read back and appended to).
    labels
        How the user names each argument (``--predictions``, ``FILE``).
    resolve
        For an argument whose value may be a name rather than a path, or a folder of which
        only some files are read, the files it stands for (:data:`Resolver`); other
        values are paths when such a path exists.
    folders
        For an output that is a folder, the files written in it (:data:`FolderFiles`).
    """

    reads: tuple[str, ...]
    writes: tuple[str, ...]
    labels: Mapping[str, str]
    resolve: Mapping[str, Resolver]
    folders: Mapping[str, FolderFiles]

    def inputs(self, args: argparse.Namespace) -> dict[Identity, list[tuple[str, str]]]:
        """The existing files ``args`` reads, by identity (:func:`identity`), each with
        the arguments (``dest``, words) that read it; a folder counts every file under it,
        through links (unreadable entries are skipped: the reader reports them)."""
        found: dict[Identity, list[tuple[str, str]]] = {}
        for dest in self.reads:
            for label, path in self._read(dest, args):
                for key in _files_of(path):
                    found.setdefault(key, []).append((dest, label))
            value = getattr(args, dest, None)
            if "-" in (value if isinstance(value, list | tuple) else [value]):
                args.stdin_identity = stdin_identity()
        stdin = getattr(args, "stdin_identity", None)
        if stdin is not None:  # a file given as standard input (or spooled from it)
            found.setdefault(stdin, []).append(("-", "standard input"))
        return found

    def outputs(self, args: argparse.Namespace) -> dict[str, tuple[str, Path]]:
        """The files ``args`` writes (standard output left out), by the words that name
        them, each with its argument (``dest``); a folder output gives the files written
        in it."""
        found: dict[str, tuple[str, Path]] = {}
        for dest in self.writes:
            for value in _values(getattr(args, dest, None)):
                label = f"{self.labels[dest]} {value}"
                if dest in self.folders:
                    for file in self.folders[dest](Path(value)):
                        found[f"{label} ({file.name})"] = (dest, file)
                else:
                    found[label] = (dest, Path(value))
        return found

    def _read(self, dest: str, args: argparse.Namespace) -> Iterator[tuple[str, Path]]:
        """The paths argument ``dest`` of ``args`` names, each with the words naming it."""
        flag = self.labels[dest]
        values: list[str | None] = list(_values(getattr(args, dest, None)))
        if dest not in self.resolve:
            yield from ((f"{flag} {value}", Path(str(value))) for value in values)
            return
        for value in values or [None]:
            for path in self.resolve[dest](value, args):
                named = f"{flag} {value or '(default)'}"
                yield (named if str(path) == value else f"{named} ({path})"), path


def _values(value: Any) -> Iterator[str]:
    """The paths an argument's value names: none for ``None`` and ``-`` (a standard
    stream), one for a string, each of a list's."""
    items = value if isinstance(value, list | tuple) else [value]
    for item in items:
        if isinstance(item, str | os.PathLike) and str(item) not in ("", "-"):
            yield str(item)


#: A file's identity: ``(st_dev, st_ino)``, the same through every path and link to it.
Identity = tuple[int, int]


def identity(path: str | os.PathLike[str]) -> Identity | None:
    """The identity of the regular file at ``path`` (through links), ``None`` if there is
    none or it cannot be read."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


def stdin_identity() -> Identity | None:
    """The identity of the file standard input reads, if it is one (not a pipe)."""
    try:
        return identity(f"/dev/fd/{sys.stdin.fileno()}")
    except (AttributeError, OSError, ValueError):  # replaced, closed or no descriptor
        return None


def _files_of(path: Path) -> Iterator[Identity]:
    """The identities of the file ``path``, or of every file under the folder ``path``,
    following links to folders (each folder once)."""
    own = identity(path)
    if own is not None:
        yield own
        return
    if not path.is_dir():
        return
    seen: set[Identity] = set()
    for folder, subfolders, names in os.walk(path, followlinks=True):
        try:
            status = os.stat(folder)
        except OSError:
            subfolders.clear()
            continue
        if (status.st_dev, status.st_ino) in seen:  # a link back up: walked already
            subfolders.clear()
            continue
        seen.add((status.st_dev, status.st_ino))
        for name in names:
            key = identity(os.path.join(folder, name))
            if key is not None:
                yield key


def cost_model_files(value: str | None, args: argparse.Namespace) -> list[Path]:
    """The file ``--cost-model`` names: a shipped model's file, or a path (none when the
    option is not given)."""
    from schedlab.serving.cost_model import shipped_cost_models

    return [] if value is None else [shipped_cost_models().get(value) or Path(value)]


def profiles_of_data_dir(value: str | None, args: argparse.Namespace) -> list[Path]:
    """The profiles ``replay`` reads under the data directory (``--data-dir``, or the one
    used without it, :func:`~schedlab.serving.workloads.data_directory`) when no
    ``--cost-model`` is given; none else, or when there is no data directory."""
    from schedlab.serving.workloads import data_directory

    if getattr(args, "cost_model", None) is not None:
        return []
    try:
        return [data_directory(value, holding="profiles/") / "profiles"]
    except DataNotFoundError:
        return []


def declare_files(
    parser: argparse.ArgumentParser,
    reads: Sequence[str] = (),
    writes: Sequence[str] = (),
    resolve: Mapping[str, Resolver] | None = None,
    folders: Mapping[str, FolderFiles] | None = None,
) -> None:
    """Declare which arguments of the command ``parser`` parses name files it reads and
    writes (:class:`CommandFiles`), once its arguments are added.

    Raises
    ------
    ValueError
        If a name is no argument of ``parser`` (a programming error, caught by the tests).
    """
    labels: dict[str, str] = {}
    for action in parser._actions:
        if action.dest in (*reads, *writes) and action.dest not in labels:
            metavar = action.metavar if isinstance(action.metavar, str) else None
            labels[action.dest] = (
                action.option_strings[-1]
                if action.option_strings
                else (metavar or action.dest.upper())
            )
    unknown = sorted((set(reads) | set(writes)) - set(labels))
    if unknown:
        raise ValueError(f"{parser.prog}: no argument(s) {', '.join(unknown)}")
    parser.set_defaults(
        command_files=CommandFiles(
            tuple(reads), tuple(writes), labels, dict(resolve or {}), dict(folders or {})
        )
    )


def check_files(args: argparse.Namespace) -> None:
    """Refuse, before the command of ``args`` runs, an output that would overwrite one of
    its inputs or another of its outputs (module docs). Files are compared by identity
    (:func:`identity`), so every spelling of a path and every link count; the inputs are
    looked for only when an output already exists.

    Raises
    ------
    InputError
        Naming the output and the input it would overwrite, or the two outputs.
    """
    files: CommandFiles | None = getattr(args, "command_files", None)
    if files is None:
        return
    outputs = files.outputs(args)
    seen: dict[object, str] = {}
    for label, (_, path) in outputs.items():
        for key in (os.path.realpath(path), identity(path)):
            if key is not None and key in seen:
                raise InputError(f"{label}: the same file as {seen[key]}; give each its own")
            if key is not None:
                seen[key] = label
    existing = {label: (dest, identity(path)) for label, (dest, path) in outputs.items()}
    if all(key is None for _, key in existing.values()):
        return  # new files overwrite nothing
    inputs = files.inputs(args)
    for label, (dest, key) in existing.items():
        for reader, words in inputs.get(key, []) if key is not None else []:
            if reader != dest:  # a log read back and appended to is no overwrite
                raise InputError(f"{label}: is the input {words}; it would be overwritten")
