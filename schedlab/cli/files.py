"""The files a command reads and writes: declared once with its options, checked once
before it runs, so that no output of any command can overwrite one of its inputs.

Each subcommand's parser declares, by argument, which arguments name files it reads
(``reads``) and which name files it writes (``writes``): :func:`declare_files`. Before
the command runs, :func:`check_files` resolves both (a name such as a built-in workload
or a shipped cost model resolves to the file it stands for, through ``resolve``) and
refuses, in one line:

* an output that is an existing input file, by any spelling of its path, through symbolic
  or hard links (:func:`os.path.samefile`); a folder read (a recorded run, a profile)
  counts every file under it, unless ``resolve`` names the files read there;
* two outputs naming the same file.

A folder output (``compare -o DIR``) writes the files ``folders[dest](DIR)`` names, each
checked as an output. ``tests/cli/test_files.py`` walks every subcommand's options and
checks that each that names a file is declared, and tries each output onto each input.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from schedlab.errors import DataNotFoundError, InputError

__all__ = [
    "CommandFiles",
    "check_files",
    "check_outputs",
    "cost_model_files",
    "data_dir_files",
    "declare_files",
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

    def inputs(self, args: argparse.Namespace, but: str = "") -> dict[str, Path]:
        """The existing files ``args`` reads, by the words that name them (a folder: each
        file under it), but those of argument ``but``."""
        found: dict[str, Path] = {}
        for dest in self.reads:
            if dest == but:
                continue
            for label, path in self._read(dest, args):
                if path.is_dir():
                    files = sorted(f for f in path.rglob("*") if f.is_file())
                    found |= {f"{label} (its file {f})": f for f in files}
                elif path.is_file():
                    found[label] = path
        return found

    def outputs(self, args: argparse.Namespace, *dests: str) -> dict[str, Path]:
        """The files ``args`` writes (standard output left out) through the arguments
        ``dests`` (default all), by the words that name them; a folder output gives the
        files written in it."""
        found: dict[str, Path] = {}
        for dest in dests or self.writes:
            for value in _values(getattr(args, dest, None)):
                label = f"{self.labels[dest]} {value}"
                if dest in self.folders:
                    for file in self.folders[dest](Path(value)):
                        found[f"{label} ({file.name})"] = file
                else:
                    found[label] = Path(value)
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


def cost_model_files(value: str | None, args: argparse.Namespace) -> list[Path]:
    """The file ``--cost-model`` names: a shipped model's file, or a path (none when the
    option is not given)."""
    from schedlab.serving.cost_model import shipped_cost_models

    return [] if value is None else [shipped_cost_models().get(value) or Path(value)]


def data_dir_files(value: str | None, args: argparse.Namespace) -> list[Path]:
    """The data directory ``--data-dir`` names, or the one used without it
    (:func:`~schedlab.serving.workloads.data_directory`; none if there is none)."""
    from schedlab.serving.workloads import data_directory

    try:
        return [data_directory(value)]
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
        if action.dest in (*reads, *writes):
            labels[action.dest] = (
                action.option_strings[-1]
                if action.option_strings
                else (action.metavar if isinstance(action.metavar, str) else action.dest.upper())
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
    its inputs or another of its outputs (module docs).

    Raises
    ------
    InputError
        Naming the output and the input it would overwrite.
    """
    files: CommandFiles | None = getattr(args, "command_files", None)
    if files is None:
        return
    for dest in files.writes:  # a log read back and appended to is no overwrite
        check_outputs(files.outputs(args, dest), files.inputs(args, but=dest))
    seen: dict[Path, str] = {}
    for label, path in files.outputs(args).items():
        key = Path(os.path.abspath(path))
        if key in seen:
            raise InputError(f"{label}: the same file as {seen[key]}; give each output its own")
        seen[key] = label


def check_outputs(outputs: Mapping[str, Path | str | None], inputs: Mapping[str, Path]) -> None:
    """Refuse an output that is one of the files the command reads.

    Parameters
    ----------
    outputs
        The files written, by the words that name them; ``None``: not written.
    inputs
        The existing files read, by the words that name them.

    Raises
    ------
    InputError
        If an output is an existing file that is an input file, by any spelling of its
        path, through symbolic links or hard links (:func:`os.path.samefile`): the run
        would destroy its own input.
    """
    for out, target in outputs.items():
        if not target or not Path(target).is_file():
            continue  # a new file overwrites nothing
        for flag, source in inputs.items():
            if os.path.samefile(target, source):
                raise InputError(f"{out}: is the input {flag}; it would be overwritten")
