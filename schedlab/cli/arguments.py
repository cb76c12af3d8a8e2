"""argparse value types and option groups shared by the command lines of schedlab."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from schedlab.budget import MAX_TIME_LIMIT
from schedlab.errors import InputError
from schedlab.jobs import BACKENDS, DEFAULT_BACKEND, Executor

__all__ = [
    "add_executor_options",
    "add_renamed_option",
    "check_outputs",
    "comma_list",
    "executor_from",
    "non_negative_int",
    "positive_int",
    "positive_seconds",
    "refuse_overwriting",
    "single_or_grid",
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


def positive_seconds(text: str) -> float:
    """A finite number of seconds ``> 0`` (time limits)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    if value > MAX_TIME_LIMIT:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_TIME_LIMIT:.0e} seconds, got {text!r} (for no limit, leave it out)"
        )
    return value


class _RenamedOption(argparse.Action):
    """Store the value like the option's new name, after one line on stderr."""

    def __init__(self, *args: Any, new: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"schedlab: warning: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed_option(parser: argparse.ArgumentParser, old: str, new: str, **kwargs: Any) -> None:
    """Keep ``old``, the former name of option ``new`` (already added), as a hidden
    alias: it sets the same value and prints a one-line deprecation warning on stderr.
    ``kwargs`` are those of ``new`` that read its value (``type``, ``choices``)."""
    dest = new.lstrip("-").replace("-", "_")
    parser.add_argument(
        old,
        dest=dest,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
        action=_RenamedOption,
        new=new,
        **kwargs,
    )


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


def refuse_overwriting(
    args: argparse.Namespace, outputs: Sequence[str], inputs: Mapping[str, Path | str | None]
) -> None:
    """Refuse an output option (``--records``) naming a file the command reads:
    :func:`check_outputs` of the options ``outputs`` of ``args`` (those not given are
    skipped)."""
    check_outputs(
        {out: getattr(args, out.lstrip("-").replace("-", "_"), None) for out in outputs}, inputs
    )


def check_outputs(
    outputs: Mapping[str, Path | str | None], inputs: Mapping[str, Path | str | None]
) -> None:
    """Refuse an output that is one of the files the command reads: the one check of
    every command that writes a file.

    Parameters
    ----------
    outputs
        The files written, by the option (or ``--out DIR``'s file) that names them;
        ``None``: not written.
    inputs
        The files read, by the option or argument that names them (``None``: that input
        is no file, e.g. a built-in workload or standard input).

    Raises
    ------
    InputError
        If an output and an input are the same existing file, by any spelling of its
        path, through symbolic links or hard links (:func:`os.path.samefile`): the run
        would destroy its own input.
    """
    for out, target in outputs.items():
        if not target or not Path(target).is_file():
            continue
        for flag, source in inputs.items():
            if source is not None and Path(source).is_file() and os.path.samefile(target, source):
                raise InputError(f"{out}: {target} is the {flag} file; it would be overwritten")
