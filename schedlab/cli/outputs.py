"""Where the output of a command goes: the one way every command writes and says so.

The naming scheme (``docs/manual/cli.md``, "Habits every command shares"):

* what a command prints is a table or a summary, on standard output, as ``--format text``
  (aligned, for people), ``json`` or ``csv`` (plain numbers, units in the column names:
  :func:`schedlab.tables.rows_to_csv`); ``--json`` is ``--format json``;
* ``-o/--output PATH`` is the file a command exists to make (an instance, a model, a
  cost model, a profile, a comparison report's folder); ``-`` is standard output where
  the file is text;
* ``--plot FILE`` is a figure (never standard output: a PNG is no text);
* ``--records FILE`` and ``--schedule-csv FILE`` are artefacts beside the table (per
  request, per scheduled request), ``-`` being standard output: the table then goes to
  standard error, so that standard output holds the artefact alone;
* ``--results FILE.jsonl`` is a grid's resumable log of finished jobs.

Each file written is announced by one ``wrote FILE`` line on standard error
(:func:`wrote`).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from schedlab.errors import InputError

__all__ = [
    "FORMATS",
    "STDOUT",
    "add_format_option",
    "open_output",
    "refuse_stdout",
    "table_aside",
    "wrote",
]

#: The formats of a printed table.
FORMATS = ("text", "json", "csv")

#: The output name that writes to standard output.
STDOUT = "-"


def add_format_option(parser: argparse.ArgumentParser) -> None:
    """``--format {text,json,csv}`` (default text) and ``--json``, the same as
    ``--format json``, of a command that prints a table."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text: an aligned table (the default); json; csv: plain numbers, units in "
        "the column names",
    )
    parser.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="the same as --format json",
    )


def wrote(path: str | Path, detail: str = "") -> None:
    """The line on standard error that says a file was written (``detail``: what it
    holds, e.g. ``n = 200``)."""
    print(f"wrote {path}{': ' + detail if detail else ''}", file=sys.stderr)


def refuse_stdout(path: str | Path | None, flag: str, why: str) -> None:
    """Refuse ``-`` for an output that cannot go to standard output, saying ``why``."""
    if path is not None and str(path) == STDOUT:
        raise InputError(f"{flag} -: {why}; name a file")


@contextlib.contextmanager
def open_output(path: str | Path, detail: str = "") -> Iterator[TextIO]:
    """A text stream to write an output to: standard output for ``-``, else the file
    ``path``, announced by :func:`wrote` once it is closed."""
    if str(path) == STDOUT:
        yield sys.stdout
        sys.stdout.flush()
        return
    with Path(path).open("w", encoding="utf-8", newline="") as handle:
        yield handle
    wrote(path, detail)


@contextlib.contextmanager
def table_aside(*artefacts: str | Path | None) -> Iterator[None]:
    """Print the command's table on standard error while it runs if one of the
    ``artefacts`` (``--records``, ``--schedule-csv``) went to standard output (``-``), so
    that standard output holds that artefact alone; else leave standard output be."""
    if any(str(path) == STDOUT for path in artefacts if path is not None):
        with contextlib.redirect_stdout(sys.stderr):
            yield
    else:
        yield
