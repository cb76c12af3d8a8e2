"""argparse value types and option groups shared by the command lines of schedlab."""

from __future__ import annotations

import argparse
import contextlib
import math
import tempfile
from pathlib import Path

from schedlab.cli.files import stdin_identity
from schedlab.errors import InputError
from schedlab.jobs import BACKENDS, DEFAULT_BACKEND, Executor
from schedlab.json_files import read_bytes

__all__ = [
    "add_executor_options",
    "comma_list",
    "executor_from",
    "non_negative_int",
    "positive_int",
    "read_from_stdin",
    "single_or_grid",
    "spool_stdin",
]


def comma_list(text: str) -> list[str]:
    """Comma-separated names or values, each non-empty (``fcfs,,svf`` is refused rather
    than read as two names) and none twice."""
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list without empty items, got {text!r}"
        )
    twice = sorted({x for x in items if items.count(x) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} given twice in {text!r}")
    return items


def non_negative_int(text: str) -> int:
    """An integer ``>= 0`` (seeds, counts); argparse reports anything else."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def positive_int(text: str) -> int:
    """An integer ``>= 1`` (engine limits, parallel degrees)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def positive_number(text: str) -> float:
    """A finite number ``> 0`` (work budgets); argparse reports anything else."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def read_from_stdin(parser: argparse.ArgumentParser, *inputs: tuple[str, str]) -> None:
    """Let ``-`` name standard input for the inputs of a command read by a file reader,
    each ``(attribute, file name)``: :func:`spool_stdin` copies standard input to a file
    of that name (its suffix tells the reader the format) while the command runs."""
    parser.set_defaults(stdin_inputs=inputs)


def spool_stdin(args: argparse.Namespace, stack: contextlib.ExitStack) -> None:
    """Read standard input (at most :data:`~schedlab.json_files.MAX_FILE_BYTES`) into a
    temporary file for the input of ``args`` given as ``-`` (:func:`read_from_stdin`),
    and name that file in its place; ``stack`` removes it once the command ends. Where
    standard input is a file, its identity is kept as ``args.stdin_identity``, so that no
    output may overwrite it (:mod:`schedlab.cli.files`).

    Readers that read a file twice (a checksum, then rows) or detect its format from
    its first line then take standard input as they take a file.
    """
    for attr, name in getattr(args, "stdin_inputs", ()):
        if getattr(args, attr, None) == "-":
            args.stdin_identity = stdin_identity()
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="schedlab-")))
            copy = folder / name
            copy.write_bytes(read_bytes("-", "standard input"))
            setattr(args, attr, str(copy))


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """``--backend``, ``--workers``, ``--address`` and ``--results`` of a command that runs
    a grid of jobs (:mod:`schedlab.jobs`)."""
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=DEFAULT_BACKEND,
        help="where the jobs run: this process, a local process pool (default), or a Ray "
        "cluster (the ray extra: pip install -e '.[ray]'); the results are the same",
    )
    parser.add_argument(
        "--workers", type=positive_int, default=None, help="local processes (default: all cores)"
    )
    parser.add_argument(
        "--address",
        default=None,
        metavar="auto|HOST:PORT",
        help="the Ray cluster of --backend ray (default: start a local instance)",
    )
    parser.add_argument(
        "--results",
        default=None,
        metavar="FILE.jsonl",
        help="stream each finished job to this file; rerunning the command skips the jobs "
        "found there",
    )


def executor_from(args: argparse.Namespace, progress: bool = False) -> Executor:
    """The one :class:`~schedlab.jobs.Executor` the options above give (with a progress
    bar if ``progress``); its refusals name the options (``--workers: ...``)."""
    if args.results == "-":
        raise InputError("--results -: a grid's log is read back when it reruns; name a file")
    try:
        return Executor(args.backend, args.workers, args.address, args.results, progress)
    except InputError as exc:
        raise InputError(f"--{exc}".replace(" backend ", " --backend ")) from None


def single_or_grid(args: argparse.Namespace, *pairs: tuple[str, str]) -> None:
    """Refuse an option given both alone and as a grid, for each ``(single, grid)`` pair
    of attribute names (``("rate", "rates")``): the grid would silently win.

    The single option's default must be ``None``, so that giving it can be told apart.
    """
    for single, grid in pairs:
        if getattr(args, grid) and getattr(args, single) is not None:
            raise InputError(f"--{single} and --{grid}: give one (a grid's {grid} are --{grid})")
