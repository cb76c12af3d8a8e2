"""The ``schedlab`` command line.

Subcommands come from seven modules, one per part of the package:
:mod:`schedlab.cli.offline` (``solve``, ``solvers``, ``compare``),
:mod:`schedlab.cli.instance_tools` (``verify``, ``bound``, ``generate``, ``export``),
:mod:`schedlab.cli.serving` (``simulate``), :mod:`schedlab.cli.capacity` (``capacity``,
``headroom``, ``sweep``), :mod:`schedlab.cli.cluster` (``cluster``),
:mod:`schedlab.cli.calibration` (``calibrate``, ``replay``) and
:mod:`schedlab.cli.profiles` (``profile import``,
``profile export``). What they share is in four more: :mod:`schedlab.cli.arguments`
(value types, option groups, ``-`` for standard input), :mod:`schedlab.cli.files` (the
files each command reads and writes: no output overwrites an input),
:mod:`schedlab.cli.durations`
(the one reading of a duration) and :mod:`schedlab.cli.outputs` (``--format``, ``-`` for
standard output, the ``wrote FILE`` lines). Every
:class:`~schedlab.errors.SchedlabError` (and unreadable
files) becomes one line on stderr and exit code 2; ``verify`` exits 1 when the schedule
is infeasible. A :class:`~schedlab.errors.SchedlabNote` (input read and repaired, e.g.
requests sorted by time) is one ``schedlab: note:`` line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Sequence
from typing import NoReturn, TextIO

from schedlab import __version__
from schedlab.errors import SchedlabError, SchedlabNote

__all__ = ["COMMANDS", "build_parser", "main"]


class _OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``schedlab simulate: error: ...``)
    and exit code 2, without the usage block argparse prints first; ``--help`` shows the
    usage. Subcommand parsers are of the same class (``add_subparsers`` makes them so)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


#: The module of :mod:`schedlab.cli` that registers each subcommand
#: (``tests/cli/test_help.py`` checks it against what each module registers).
COMMANDS = {
    "solve": "offline",
    "solvers": "offline",
    "compare": "offline",
    "verify": "instance_tools",
    "bound": "instance_tools",
    "generate": "instance_tools",
    "export": "instance_tools",
    "simulate": "serving",
    "capacity": "capacity",
    "headroom": "capacity",
    "sweep": "capacity",
    "cluster": "cluster",
    "calibrate": "calibration",
    "replay": "calibration",
    "profile": "profiles",
}

#: The modules that register subcommands, in the order ``schedlab --help`` lists them.
_PARTS = ("offline", "instance_tools", "serving", "capacity", "cluster", "calibration", "profiles")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every subcommand, or with those of ``command``'s module
    only (what a run of ``command`` needs: the other modules are not imported)."""
    parser = _OneLineParser(
        prog="schedlab",
        description="Scheduling theory of LLM serving: solve, bound and compare "
        "memory-constrained batching; simulate chunked-prefill policies.",
    )
    parser.add_argument("--version", action="version", version=f"schedlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parts = (COMMANDS[command],) if command in COMMANDS else _PARTS
    for part in parts:
        importlib.import_module(f"schedlab.cli.{part}").register(sub)
    return parser


def _one_line(message: str) -> str:
    """``message`` on one line: a message quoting a library's text may span several."""
    return " ".join(message.split())


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C: the running command unwinds, and worker processes are ended
    (:func:`schedlab.jobs.run_jobs`) instead of being orphaned."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code. While it runs, SIGTERM interrupts
    it as Ctrl-C does (exit code 130), and the previous handler is restored after."""
    if threading.current_thread() is not threading.main_thread():  # signals need it
        return _run(argv)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


#: A negative value with a unit or exponent (``-10s``, ``-1e3``): argparse reads such a
#: token as an option, not as the value of the option before it (plain ``-10`` it keeps).
_NEGATIVE_VALUE = re.compile(r"-\.?\d")
_PLAIN_NEGATIVE = re.compile(r"-\d+|-\d*\.\d+")


def _attach_negative_values(argv: Sequence[str]) -> list[str]:
    """``--opt -10s`` as ``--opt=-10s``, so that a negative duration or number reaches
    the check that says what is wrong with it, instead of argparse's "expected one
    argument" (a flag that takes no value still gets argparse's own error)."""
    out: list[str] = []
    for k, token in enumerate(argv):
        if token == "--":  # what follows are positional arguments, as they are
            return [*out, *argv[k:]]
        before = out[-1] if out else ""
        is_option = before.startswith("--") and "=" not in before
        if is_option and _NEGATIVE_VALUE.match(token) and not _PLAIN_NEGATIVE.fullmatch(token):
            out[-1] = f"{before}={token}"
        else:
            out.append(token)
    return out


def _run(argv: Sequence[str] | None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    if given == ["--version"]:  # at once: no subcommand's parser is built
        print(f"schedlab {__version__}")
        return 0
    try:
        parser = build_parser(given[0] if given else None)
    except KeyboardInterrupt:  # before any command runs: the same one line
        print("schedlab: interrupted", file=sys.stderr)
        return 130
    args = parser.parse_args(_attach_negative_values(given))
    with warnings.catch_warnings():
        warnings.simplefilter("always", SchedlabNote)
        shown = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, SchedlabNote):  # a note on the input: one line
                print(f"schedlab: note: {_one_line(str(message))}", file=sys.stderr)
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        return _command(args)


def _command(args: argparse.Namespace) -> int:
    """Run the parsed command: every error it raises on purpose becomes one line."""
    from schedlab.cli.arguments import spool_stdin
    from schedlab.cli.files import check_files

    try:
        with contextlib.ExitStack() as stack:
            spool_stdin(args, stack)
            check_files(args)
            return int(args.func(args))
    except SchedlabError as exc:
        print(f"schedlab: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader (e.g. `head`) closed the pipe: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"schedlab: error: {_one_line(where + str(exc.strerror or exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("schedlab: interrupted", file=sys.stderr)
        return 130
