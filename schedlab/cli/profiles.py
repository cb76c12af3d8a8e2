"""Command-line subcommands ``profile import`` and ``profile export`` (added by ``schedlab.cli``).

``schedlab profile import TABLE.csv -o DIR --model M --hardware H [--format F]
[--architecture A] [--tp T] [--variant V] [--grid-chunks S --grid-decodes S --grid-kv S]
[--skew-alpha A]`` checks a timing table of one's own GPU (one CSV, one measurement a row:
:mod:`schedlab.calibration.profile_table`, ``docs/profile-format.md``) and writes it as a
profile directory that ``schedlab calibrate DIR`` reads.

``schedlab profile export PROFILE_DIR -o TABLE.csv [--tp T]`` writes a profile directory's
measurements as such a table, and prints the ``profile import`` options that rebuild it.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from schedlab.cli.arguments import positive_int, read_from_stdin
from schedlab.cli.files import declare_files
from schedlab.cli.outputs import STDOUT, refuse_stdout, table_aside, wrote
from schedlab.errors import InputError

__all__ = ["register"]


def _import_command(args: argparse.Namespace) -> str:
    """The command line of ``args``, as ``meta.yaml`` records it (its options spelt out in
    one order, whatever order they were given in)."""
    words = ["schedlab", "profile", "import", args.table, "-o", args.output]
    for flag in ("format", "model", "hardware", "architecture", "tp", "variant"):
        value = getattr(args, flag)
        if value is not None:
            words += [f"--{flag}", str(value)]
    for flag in ("grid_chunks", "grid_decodes", "grid_kv", "skew_alpha"):
        value = getattr(args, flag)
        if value is not None:
            words += [f"--{flag.replace('_', '-')}", str(value)]
    return shlex.join(words)


def _cmd_import(args: argparse.Namespace) -> int:
    from schedlab.calibration.profile_exchange import import_timing_table
    from schedlab.calibration.profile_table import DEFAULT_READER

    refuse_stdout(args.output, "--output", "a profile is a folder of files")
    specs = (args.grid_chunks, args.grid_decodes, args.grid_kv)
    if any(spec is not None for spec in specs) and None in specs:
        raise InputError("--grid-chunks, --grid-decodes, --grid-kv: give all three or none")
    summary = import_timing_table(
        args.table,
        args.output,
        model=args.model,
        hardware=args.hardware,
        architecture=args.architecture,
        tp=args.tp,
        variant=args.variant,
        grid=None if specs[0] is None else (specs[0], specs[1], specs[2]),
        skew_alpha=args.skew_alpha,
        skew_measurements=args.skew_measurements,
        command=_import_command(args),
        reader=args.format or DEFAULT_READER,
    )
    print(summary.to_text())
    for path in sorted(Path(args.output).rglob("*")):
        if path.is_file():
            wrote(path)
    tp = "" if 1 in summary.grids else f" --tp {min(summary.grids)}"
    print(f"next: schedlab calibrate {shlex.quote(args.output)}{tp} -o MODEL.json")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from schedlab.calibration.profile_exchange import export_timing_table

    root = Path(args.profile_dir)
    summary = export_timing_table(root, args.output, tp=args.tp)
    if args.output != STDOUT:
        wrote(summary.output)
    with table_aside(args.output):
        for (tp, kind), count in summary.counts.items():
            print(f"tp{tp} {kind}: {count} rows")
        if summary.left_out:
            print(
                f"left out (no place in a timing table): {', '.join(summary.left_out)}; "
                "a pooled decode-skew alpha is given to import as --skew-alpha"
            )
        rebuild = shlex.join(
            ["schedlab", "profile", "import", args.output, "-o", "DIR", *summary.import_options]
        )
        print(f"rebuild: {rebuild}")
    return 0


def _skew_alpha(text: str) -> float:
    """A number in ``[0, 1]``; argparse reports anything else."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def _files_under(folder: Path) -> list[Path]:
    """The files an import could overwrite in its output folder: every file there (it
    refuses a folder that is not empty, so none once this check has passed)."""
    return sorted(path for path in folder.rglob("*") if path.is_file())


def _declare_files(imp: argparse.ArgumentParser, exp: argparse.ArgumentParser) -> None:
    """The files ``profile import`` (``imp``) and ``profile export`` (``exp``) read and
    write (:func:`~schedlab.cli.files.declare_files`)."""
    declare_files(
        imp,
        reads=["table", "skew_measurements"],
        writes=["output"],
        folders={"output": _files_under},
    )
    declare_files(exp, reads=["profile_dir"], writes=["output"])


def register(subparsers: Any) -> None:
    """Add ``profile import`` and ``profile export`` to the ``schedlab`` command line."""
    from schedlab.calibration.profile_table import DEFAULT_READER, profile_reader_names

    group = subparsers.add_parser(
        "profile",
        help="make a GPU profile from one's own timing table, or list a profile as one",
        description="Convert between a timing table (one CSV of per-op measurements, "
        "docs/profile-format.md) and the profile directory that calibrate reads.",
    )
    commands = group.add_subparsers(dest="profile_command", required=True, metavar="COMMAND")
    imp = commands.add_parser(
        "import",
        help="check a timing table and write it as a profile directory",
        description="Check a timing table of your own GPU (columns tp, kind, op, tokens, "
        "sequences, activated_experts, prefill_chunk, kv_prefill, n_decode, kv_decode, "
        "time_us; docs/profile-format.md) and write a profile directory that "
        "'schedlab calibrate' reads.",
    )
    imp.add_argument("table", metavar="TABLE.csv", help="the timing table (- for standard input)")
    read_from_stdin(imp, ("table", "stdin.csv"))
    imp.add_argument(
        "--format",
        default=None,
        help=f"the table's format: {', '.join(profile_reader_names())} (default {DEFAULT_READER})",
    )
    imp.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="new (or empty) profile directory"
    )
    imp.add_argument(
        "--model", required=True, help="the model timed, e.g. meta-llama/Llama-3.1-8B"
    )
    imp.add_argument("--hardware", required=True, help="a name for the GPU, e.g. H100")
    imp.add_argument(
        "--architecture",
        default=None,
        help="op layout to check against, e.g. llama, qwen3, qwen3_moe (default: the one "
        "whose ops the table has; schedlab.calibration.layouts lists them)",
    )
    imp.add_argument(
        "--tp",
        type=positive_int,
        default=None,
        help="tensor-parallel degree of every row of a table without a tp column (default 1)",
    )
    imp.add_argument("--variant", default=None, help="data type or variant, e.g. bf16")
    for flag, example in (("chunks", "0, 16-2048 x2"), ("decodes", "0, 1-256 x2")):
        imp.add_argument(
            f"--grid-{flag}",
            default=None,
            metavar="LEVELS",
            help=f"attention grid the rows were measured on, e.g. '{example}' (with the "
            "other two; default: the largest complete grid in the rows)",
        )
    imp.add_argument(
        "--grid-kv",
        default=None,
        metavar="LEVELS",
        help="KV levels of the grid (cached prefill tokens and decode KV), e.g. '0, 16-16384 x2'",
    )
    imp.add_argument(
        "--skew-alpha",
        type=_skew_alpha,
        default=None,
        metavar="A",
        help="measured decode-skew coefficient in [0, 1] (default: no skew correction)",
    )
    imp.add_argument(
        "--skew-measurements",
        default=None,
        metavar="SKEW.csv",
        help="skewed-batch measurements (docs/profile-format.md, skew.csv) for a table of one "
        "degree: calibrate fits the skew correction on them and keeps it if it lowers "
        "held-out error",
    )
    imp.set_defaults(func=_cmd_import)

    exp = commands.add_parser(
        "export",
        help="write a profile directory's measurements as one timing table",
        description="Write the measurements of a profile directory (meta.yaml, tp<N>/) as "
        "one timing table, the format 'schedlab profile import' reads.",
    )
    exp.add_argument("profile_dir", metavar="PROFILE_DIR", help="the profile directory to list")
    exp.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="TABLE.csv",
        help="write the timing table here (- for standard output)",
    )
    exp.add_argument(
        "--tp", type=positive_int, default=None, help="this degree only (default: all)"
    )
    exp.set_defaults(func=_cmd_export)
    _declare_files(imp, exp)
