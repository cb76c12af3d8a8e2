"""Timing tables to and from profile directories: :func:`import_timing_table` writes the
profile directory :func:`~schedlab.calibration.fit.calibrate` reads from a table in any
registered format (:data:`~schedlab.calibration.profile_table.PROFILE_READERS`),
:func:`export_timing_table` writes a profile directory's measurements back as one table
(:mod:`schedlab.calibration.profile_table` states the format).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.calibration.attention_grid import parse_grid_spec
from schedlab.calibration.layouts import get_layout
from schedlab.calibration.profile_table import (
    COLUMNS,
    DEFAULT_READER,
    KEY_COLUMNS,
    KINDS,
    get_profile_reader,
)
from schedlab.calibration.profiles import (
    read_llmservingsim_profile,
    read_meta_yaml,
    read_skew_samples,
)
from schedlab.calibration.table_checks import (
    check_experts,
    check_grid,
    check_ops,
    infer_architecture,
)
from schedlab.errors import DataNotFoundError, FormatError, InputError
from schedlab.json_files import read_text, write_text
from schedlab.llm.models import get_model_shape

__all__ = ["ExportSummary", "ImportSummary", "export_timing_table", "import_timing_table"]

#: The files of one ``tp<N>`` folder: file name, header, and the kind written there.
_FILES = (
    ("dense.csv", ("layer", "tokens", "time_us"), "dense"),
    ("per_sequence.csv", ("layer", "sequences", "time_us"), "per_sequence"),
    ("attention.csv", (*KINDS["attention"], "time_us"), "attention"),
    ("moe.csv", ("tokens", "activated_experts", "time_us"), "moe"),
)


def _number_text(value: float | int | str) -> str:
    """A value as written: integers plainly, times in Python's shortest round-trip form."""
    return repr(value) if isinstance(value, float) else str(value)


def _csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([[_number_text(v) for v in row] for row in rows])
    return buffer.getvalue()


def _fresh_directory(output: Path) -> None:
    """Create ``output``, refusing a file or a directory that is not empty."""
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise InputError(
            f"{output}: exists and is not an empty directory (import writes a new profile "
            "directory)"
        )
    if not output.parent.is_dir():
        raise DataNotFoundError(f"{output}: no folder {output.parent} to write the profile in")
    output.mkdir(exist_ok=True)


@dataclass(frozen=True)
class ImportSummary:
    """What :func:`import_timing_table` wrote.

    Attributes
    ----------
    output
        The profile directory.
    architecture
        The op layout the table was checked against.
    inferred
        Whether the architecture was found from the table's ops (not given).
    counts
        ``(tp, kind) -> rows`` written.
    grids
        ``tp -> (chunks, contexts, decodes, kvs)``: the attention grid calibrate will
        use at each degree; the other attention rows are its held-out rows.
    grid_rows
        ``tp -> rows on that grid``.
    """

    output: Path
    architecture: str
    inferred: bool
    counts: Mapping[tuple[int, str], int]
    grids: Mapping[int, tuple[list[float], list[float], list[float], list[float]]]
    grid_rows: Mapping[int, int]

    def to_text(self) -> str:
        """A few lines for the terminal."""

        def axis(values: list[float]) -> str:
            shown = [f"{v:g}" for v in values]
            return ",".join(shown) if len(shown) <= 4 else f"{shown[0]},{shown[1]}..{shown[-1]}"

        how = "found from the table's ops" if self.inferred else "given"
        lines = [f"architecture {self.architecture} ({how})"]
        for tp, (chunks, contexts, decodes, kvs) in self.grids.items():
            counts = ", ".join(
                f"{self.counts[(tp, kind)]} {kind}"
                for kind in KINDS
                if self.counts.get((tp, kind))
            )
            total = self.counts[(tp, "attention")]
            lines.append(
                f"tp{tp}: {counts} rows; attention grid chunks {axis(chunks)}, contexts "
                f"{axis(contexts)}, decodes {axis(decodes)}, kv {axis(kvs)}: "
                f"{self.grid_rows[tp]} of {total} rows (the others are held out)"
            )
        return "\n".join(lines)


def import_timing_table(
    path: str | Path,
    output: str | Path,
    *,
    model: str,
    hardware: str,
    architecture: str | None = None,
    tp: int | None = None,
    variant: str | None = None,
    grid: tuple[str, str, str] | None = None,
    skew_alpha: float | None = None,
    skew_measurements: str | Path | None = None,
    command: str | None = None,
    reader: str = DEFAULT_READER,
) -> ImportSummary:
    """Check a timing table and write it as a profile directory calibrate reads.

    Parameters
    ----------
    path
        The timing table (module docstring).
    output
        The profile directory to write: new, or empty.
    model
        The model the table times, as :mod:`schedlab.llm.models` knows it (its layer
        count scales the per-layer rows; its experts bound ``activated_experts``).
    hardware
        A name for the GPU (``meta.yaml``'s ``hardware``; it names the fitted model).
    architecture
        The op layout to check against (:data:`~schedlab.calibration.layouts.LAYOUTS`);
        default: the one layout whose ops the table has exactly.
    tp
        The degree of every row of a table without a ``tp`` column (default 1).
    variant
        The data type or other variant (``bf16``), recorded in ``meta.yaml``.
    grid
        ``(chunks, n_decode, kv)`` level specs (``"0, 16-2048 x2"``,
        :func:`~schedlab.calibration.attention_grid.parse_grid_spec`) of the attention
        grid the rows were measured on; calibrate then fits on those levels only and
        holds the other rows out. Default: the largest complete grid in the rows.
    skew_alpha
        A measured decode-skew coefficient :math:`\\alpha \\in [0, 1]` for every degree
        (``skew_fit.per_tp.<t>.alpha_default``); default: no skew correction.
    skew_measurements
        A ``skew.csv`` of skewed-batch measurements (``docs/profile-format.md``) for a
        table of one degree: copied as ``tp<t>/skew.csv``, where calibrate fits the skew
        correction on it and keeps it only if it lowers held-out error.
    command
        The command line that asked for the import, recorded in ``meta.yaml``.
    reader
        The format of ``path``: a name of :func:`profile_reader_names`.

    Returns
    -------
    ImportSummary

    Raises
    ------
    FormatError
        For a row :func:`read_timing_table` refuses, an op the layout needs that is
        missing (or one it does not have), an op at one size only, attention rows that
        hold no complete grid or one with a hole (named), expert rows the layout lacks.
    UnknownNameError, CalibrationError
        For an unknown model or architecture.
    InputError
        For a grid spec that cannot be read or a ``skew_alpha`` outside ``[0, 1]``.
    InputError
        Also if ``output`` exists and is not an empty directory.
    """
    # Over 100 lines by design: a third of it is the docstring naming every parameter; the body
    # checks the table, then writes the profile directory, one file after the other.
    table = get_profile_reader(reader).read(Path(path), tp)
    get_model_shape(model)
    if not hardware.strip():
        raise InputError("hardware: empty (name the GPU, e.g. H100)")
    declared = None
    if grid is not None:
        try:
            chunks, decodes, kvs = (
                parse_grid_spec(spec, f"attention grid {axis}")
                for axis, spec in zip(("chunks", "n_decode", "kv"), grid, strict=True)
            )
        except FormatError as exc:
            raise InputError(str(exc)) from None
        declared = (chunks, decodes, kvs)
    if skew_alpha is not None and not 0 <= skew_alpha <= 1:
        raise InputError(f"skew alpha: expected a number in [0, 1], got {skew_alpha!r}")
    skew_text = None
    if skew_measurements is not None:
        if len(table.tps) != 1:
            raise InputError(
                f"skew measurements: one file for a table of one degree; this one has "
                f"{', '.join(map(str, table.tps))}"
            )
        read_skew_samples(Path(skew_measurements))
        skew_text = read_text(Path(skew_measurements), "skew measurements")
    inferred = architecture is None
    name = infer_architecture(table) if architecture is None else architecture
    layout = get_layout(name, "architecture")
    grids, grid_rows = {}, {}
    for degree in table.tps:
        check_ops(table, degree, name, layout)
        check_experts(table, degree, name, layout, model)
        grids[degree] = check_grid(table, degree, declared)
        axes = grids[degree]
        grid_rows[degree] = sum(
            1
            for row in table.rows(degree, "attention")
            if row.key[0] in axes[0]
            and row.key[1] in axes[1]
            and row.key[2] in axes[2]
            and (row.key[3] in axes[3] or row.key[2] == 0)
        )

    out = Path(output)
    _fresh_directory(out)
    counts: dict[tuple[int, str], int] = {}
    for degree in table.tps:
        folder = out / f"tp{degree}"
        folder.mkdir()
        for file_name, header, kind in _FILES:
            rows = sorted(table.rows(degree, kind), key=lambda row: row.key)
            if rows:
                text = _csv_text(header, [[*row.key, row.time_us] for row in rows])
                write_text(folder / file_name, text, "profile file")
                counts[(degree, kind)] = len(rows)
        if skew_text is not None:
            write_text(folder / "skew.csv", skew_text, "profile file")
    meta: dict[str, Any] = {
        "model": model,
        "hardware": hardware,
        "architecture": name,
        **({"variant": variant} if variant else {}),
        "tp_degrees": list(table.tps),
        "source": f"timing table {table.path.name} (sha256 {table.sha256})",
        "license": "the user's own measurements (no license stated)",
        "imported_from": {
            "file": str(table.path),
            "sha256": table.sha256,
            "rows": len(table),
            "command": command or "schedlab.calibration.profile_table.import_timing_table",
        },
    }
    if grid is not None:
        meta["attention_grid"] = dict(zip(("chunks", "n_decode", "kv"), grid, strict=True))
    if skew_alpha is not None:
        meta["skew_fit"] = {
            "enabled": True,
            "per_tp": {degree: {"alpha_default": float(skew_alpha)} for degree in table.tps},
        }
    import yaml

    write_text(out / "meta.yaml", yaml.safe_dump(meta, sort_keys=False), "profile meta.yaml")
    return ImportSummary(out, name, inferred, counts, grids, grid_rows)


# -- export -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportSummary:
    """What :func:`export_timing_table` wrote, and what it left out.

    Attributes
    ----------
    output
        The table written.
    counts
        ``(tp, kind) -> rows``.
    left_out
        Files of the profile with no place in a timing table (skew measurements).
    import_options
        Arguments of ``schedlab profile import`` that rebuild the profile's ``meta.yaml``
        settings (model, hardware, architecture, variant, declared attention grid), one
        token each.
    """

    output: Path
    counts: Mapping[tuple[int, str], int]
    left_out: tuple[str, ...]
    import_options: tuple[str, ...]


_TP_FOLDER = re.compile(r"tp([1-9][0-9]*)")


def export_timing_table(
    profile_dir: str | Path, output: str | Path, *, tp: int | None = None
) -> ExportSummary:
    """Write the measurements of a profile directory as one timing table.

    Parameters
    ----------
    profile_dir
        A directory holding ``meta.yaml`` and ``tp<N>/`` folders.
    output
        The CSV file to write (overwritten).
    tp
        Export this degree only (default: every ``tp<N>`` folder).

    Returns
    -------
    ExportSummary

    Raises
    ------
    DataNotFoundError, FormatError
        As :func:`~schedlab.calibration.profiles.read_llmservingsim_profile`.
    """
    root = Path(profile_dir)
    meta = read_meta_yaml(root / "meta.yaml")
    found = sorted(
        int(match.group(1))
        for folder in root.iterdir()
        if folder.is_dir() and (match := _TP_FOLDER.fullmatch(folder.name))
    )
    degrees = found if tp is None else [tp]
    if not degrees:
        raise DataNotFoundError(f"{root}: no tp<N> folder")
    rows: list[list[Any]] = []
    counts: dict[tuple[int, str], int] = {}
    left_out: list[str] = []
    blank = dict.fromkeys(KEY_COLUMNS, "")

    def add(degree: int, kind: str, keys: list[tuple[Any, ...]], times: np.ndarray) -> None:
        for key, time_us in sorted(zip(keys, times.tolist(), strict=True)):
            row = {**blank, **dict(zip(KINDS[kind], key, strict=True))}
            rows.append([degree, kind, *(row[c] for c in KEY_COLUMNS), float(time_us)])
        counts[(degree, kind)] = counts.get((degree, kind), 0) + len(keys)

    for degree in degrees:
        profile = read_llmservingsim_profile(root, degree)
        for kind, tables in (("dense", profile.dense), ("per_sequence", profile.per_sequence)):
            for op, op_table in sorted(tables.items()):
                keys: list[tuple[Any, ...]] = [(op, int(x)) for x in op_table.x.tolist()]
                add(degree, kind, keys, op_table.time_us)
        attention = profile.attention
        columns = (
            attention.prefill_chunk,
            attention.kv_prefill,
            attention.n_decode,
            attention.kv_decode,
        )
        keys = [tuple(int(v) for v in point) for point in zip(*columns, strict=True)]
        add(degree, "attention", keys, attention.time_us)
        if profile.moe is not None and (root / f"tp{degree}" / "moe.csv").is_file():
            moe = profile.moe
            keys = [(int(t), int(a)) for t, a in zip(moe.tokens, moe.activated, strict=True)]
            add(degree, "moe", keys, moe.time_us)
        left_out += [
            f"tp{degree}/{name}"
            for name in ("skew_fit.csv", "skew.csv")
            if (root / f"tp{degree}" / name).is_file()
        ]
    out = Path(output)
    write_text(out, _csv_text(COLUMNS, rows), "timing table")
    options = [
        "--model",
        str(meta.get("model")),
        "--hardware",
        str(meta.get("hardware", "")),
        "--architecture",
        str(meta.get("architecture", "")),
    ]
    if meta.get("variant"):
        options += ["--variant", str(meta["variant"])]
    grid = meta.get("attention_grid")
    if isinstance(grid, dict) and {"chunks", "n_decode", "kv"} <= set(grid):
        for flag, key in (("chunks", "chunks"), ("decodes", "n_decode"), ("kv", "kv")):
            options += [f"--grid-{flag}", str(grid[key])]
    return ExportSummary(out, counts, tuple(left_out), tuple(options))
