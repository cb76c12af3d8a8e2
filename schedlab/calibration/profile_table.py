r"""The timing table: a whole GPU profile as one long CSV of per-op measurements.

A profile directory (``docs/profile-format.md``) spreads its measurements over several
files per tensor-parallel degree. A user who times an own GPU has them as one list, so
the table holds one measurement per row, whatever its kind:

===================  ==========================================================================
column               meaning
===================  ==========================================================================
``tp``               tensor-parallel degree the row was measured at (optional column; without
                     it every row is of one degree, 1 unless given)
``kind``             ``dense``, ``per_sequence``, ``attention`` or ``moe``: which file of the
                     profile directory the row belongs to
``op``               op name (``dense`` and ``per_sequence`` rows)
``tokens``           tokens in the batch (``dense`` and ``moe`` rows)
``sequences``        sequences that produce logits (``per_sequence`` rows)
``activated_experts`` distinct experts the tokens are routed to (``moe`` rows; optional column)
``prefill_chunk``,   the attention batch: one prefill chunk of ``prefill_chunk`` new tokens on
``kv_prefill``,      ``kv_prefill`` cached tokens, plus ``n_decode`` decodes of ``kv_decode``
``n_decode``,        KV tokens each (``attention`` rows)
``kv_decode``
``time_us``          the measured time of one call, in microseconds, ``> 0``
===================  ==========================================================================

A row fills the columns of its kind and leaves the others empty; a filled column that
does not apply is refused, as a misplaced number would otherwise be ignored.

:func:`read_timing_table` reads and checks the rows. Measurements in another format are
read by a :class:`ProfileReader` of :data:`PROFILE_READERS` (:func:`register_profile_reader`
adds one, an installed package adds one in the entry-point group :data:`ENTRY_POINTS`),
which checks them alike with :func:`timing_table_from_records`.
:func:`import_timing_table` checks
them against the op layout of an architecture (:mod:`schedlab.calibration.layouts`), the
model's shape and the attention grid, and writes a profile directory that
:func:`~schedlab.calibration.fit.calibrate` reads, its ``meta.yaml`` recording where the
table came from (file, SHA-256, command); :func:`export_timing_table` writes a profile
directory's measurements back as one table. A time survives both ways exactly: it is
written in Python's shortest round-trip form (``repr``).

Every error is a :class:`~schedlab.errors.FormatError` (or, for the model and the
architecture, the error of their registries) naming the table and its line.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.calibration.attention_grid import parse_grid_spec
from schedlab.calibration.deployment import MAX_TENSOR_PARALLEL
from schedlab.calibration.layouts import get_layout
from schedlab.calibration.profiles import (
    check_attention_row,
    number_field,
    read_csv_rows,
    read_llmservingsim_profile,
    read_meta_yaml,
    read_skew_samples,
    sha256_of,
    time_field,
)
from schedlab.calibration.table_checks import (
    Measurement,
    TimingTable,
    check_experts,
    check_grid,
    check_ops,
    infer_architecture,
)
from schedlab.errors import DataNotFoundError, FormatError, InputError
from schedlab.json_files import read_text, write_text
from schedlab.llm.models import get_model_shape
from schedlab.registry import Registry

__all__ = [
    "COLUMNS",
    "DEFAULT_READER",
    "ENTRY_POINTS",
    "KINDS",
    "PROFILE_READERS",
    "ExportSummary",
    "ImportSummary",
    "Measurement",
    "ProfileReader",
    "TimingTable",
    "export_timing_table",
    "get_profile_reader",
    "import_timing_table",
    "infer_architecture",
    "profile_reader_names",
    "read_timing_table",
    "register_profile_reader",
    "timing_table_from_records",
]

#: Columns of each kind of row that identify a measurement, in order.
KINDS: Mapping[str, tuple[str, ...]] = {
    "dense": ("op", "tokens"),
    "per_sequence": ("op", "sequences"),
    "attention": ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode"),
    "moe": ("tokens", "activated_experts"),
}
_KEY_COLUMNS = (
    "op",
    "tokens",
    "sequences",
    "activated_experts",
    "prefill_chunk",
    "kv_prefill",
    "n_decode",
    "kv_decode",
)
#: Every column of a timing table, in the order :func:`export_timing_table` writes them.
COLUMNS: tuple[str, ...] = ("tp", "kind", *_KEY_COLUMNS, "time_us")
_OPTIONAL = ("tp", "activated_experts")
#: Size columns that count something present (at least 1).
_COUNTS = ("tokens", "sequences", "activated_experts")

#: The files of one ``tp<N>`` folder: file name, header, and the kind written there.
_FILES = (
    ("dense.csv", ("layer", "tokens", "time_us"), "dense"),
    ("per_sequence.csv", ("layer", "sequences", "time_us"), "per_sequence"),
    ("attention.csv", (*KINDS["attention"], "time_us"), "attention"),
    ("moe.csv", ("tokens", "activated_experts", "time_us"), "moe"),
)


def _describe(tp: int, kind: str, key: Sequence[str | int]) -> str:
    values = " ".join(f"{c}={v}" for c, v in zip(KINDS[kind], key, strict=True))
    return f"tp{tp} {kind} {values}"


def _check_tp(tp: int | None) -> None:
    if tp is not None and not 1 <= tp <= MAX_TENSOR_PARALLEL:
        raise InputError(f"tp: expected an integer from 1 to {MAX_TENSOR_PARALLEL}, got {tp}")


def _check_columns(columns: Iterable[str], where: str, tp: int | None) -> None:
    """Refuse a column that is not one of :data:`COLUMNS`, and a ``tp`` column beside a
    degree given for every row."""
    columns = list(columns)
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise FormatError(
            f"{where}: unknown column(s) {', '.join(unknown)}; the columns are "
            f"{', '.join(COLUMNS)}"
        )
    if tp is not None and "tp" in columns:
        raise FormatError(
            f"{where}: has a tp column, so a degree for every row ({tp}) is not taken"
        )


def read_timing_table(path: str | Path, tp: int | None = None) -> TimingTable:
    """Read and check a timing table (module docstring): the ``timing-table`` reader.

    Parameters
    ----------
    path
        The CSV file.
    tp
        The tensor-parallel degree of every row, for a table without a ``tp`` column
        (default 1); refused for a table with one.

    Raises
    ------
    FormatError
        Naming the file and line: a missing or unknown column, or a row
        :func:`timing_table_from_records` refuses.
    DataNotFoundError
        If the file does not exist.
    InputError
        If ``tp`` is not from 1 to
        :data:`~schedlab.calibration.deployment.MAX_TENSOR_PARALLEL`.
    """
    path = Path(path)
    _check_tp(tp)
    header, lines = read_csv_rows(path, [c for c in COLUMNS if c not in _OPTIONAL])
    _check_columns(header, f"{path}:1", tp)
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise FormatError(f"{path}:1: column(s) {', '.join(twice)} given twice")
    records = ((line, dict(zip(header, fields, strict=True))) for line, fields in lines)
    return timing_table_from_records(path, records, tp)


def timing_table_from_records(
    path: Path, records: Iterable[tuple[int, Mapping[str, str]]], tp: int | None = None
) -> TimingTable:
    """Check measurements given as text by column (:data:`COLUMNS`), one record a line of
    ``path``, and make them a timing table: what a reader of any format
    (:class:`ProfileReader`) builds its table with, so that every format is checked alike.

    Parameters
    ----------
    path
        The file the records were read from (errors name it and the record's line).
    records
        ``(line, {column: text})``; a column left out or empty is empty.
    tp
        As :func:`read_timing_table`.

    Raises
    ------
    FormatError
        Naming the file and line: an unknown column, an unknown kind, a value that is not
        a number (or not an integer where a count is), a count below 1 or above
        :data:`~schedlab.calibration.profiles.MAX_COUNT`, a time that is not
        in ``(0, 1 h]``, a filled column that does not apply to the record's kind, an
        attention batch that is empty or inconsistent
        (:func:`~schedlab.calibration.profiles.check_attention_row`), a measurement given
        twice, or no records at all.
    InputError
        If ``tp`` is not from 1 to
        :data:`~schedlab.calibration.deployment.MAX_TENSOR_PARALLEL`.
    """
    _check_tp(tp)
    seen: dict[tuple[int, str, tuple[str | int, ...]], int] = {}
    parts: dict[tuple[int, str], list[Measurement]] = {}
    for line, record in records:
        where = f"{path}:{line}"
        _check_columns(record, where, tp)

        def cell(column: str, record: Mapping[str, str] = record) -> str:
            return record.get(column, "").strip()

        kind = cell("kind")
        if kind not in KINDS:
            raise FormatError(f"{where}: kind: expected one of {', '.join(KINDS)}, got {kind!r}")
        used = KINDS[kind]
        for column in _KEY_COLUMNS:
            if column not in used and cell(column):
                raise FormatError(
                    f"{where}: {column}: does not apply to a {kind} row (leave it empty), "
                    f"got {cell(column)!r}"
                )
        if kind == "moe" and "activated_experts" not in record:
            raise FormatError(f"{where}: a moe row needs the column activated_experts")
        degree = 1 if tp is None else tp
        if "tp" in record:
            degree = int(number_field(cell("tp"), "tp", where, integer=True))
        if not 1 <= degree <= MAX_TENSOR_PARALLEL:
            raise FormatError(
                f"{where}: tp: expected an integer from 1 to {MAX_TENSOR_PARALLEL}, got {degree}"
            )
        key: list[str | int] = []
        for column in used:
            if column == "op":
                if not cell("op"):
                    raise FormatError(f"{where}: op: empty (a {kind} row names its op)")
                key.append(cell("op"))
                continue
            value = int(number_field(cell(column), column, where, integer=True))
            if column in _COUNTS and value < 1:
                raise FormatError(f"{where}: {column}: must be >= 1, got {value}")
            key.append(value)
        time_us = time_field(cell("time_us"), "time_us", where, 1e-6)
        if time_us <= 0:
            raise FormatError(f"{where}: time_us: must be > 0, got {cell('time_us')!r}")
        if kind == "attention":
            pc, kp, n, kv = (float(v) for v in key)
            check_attention_row(pc, kp, n, kv, time_us, where)
        identity = (degree, kind, tuple(key))
        if identity in seen:
            raise FormatError(
                f"{where}: {_describe(degree, kind, key)} measured twice (first on line "
                f"{seen[identity]})"
            )
        seen[identity] = line
        parts.setdefault((degree, kind), []).append(Measurement(line, tuple(key), time_us))
    if not parts:
        raise FormatError(f"{path}: no measurements")
    return TimingTable(path, sha256_of(path), {k: tuple(v) for k, v in parts.items()})


@dataclass(frozen=True)
class ProfileReader:
    """A format of GPU timings that :func:`import_timing_table` reads.

    Attributes
    ----------
    description
        One line: what the format is.
    read
        ``read(path, tp) -> TimingTable``, ``tp`` as :func:`read_timing_table`'s; raises
        :class:`~schedlab.errors.FormatError` naming the file and place for anything it
        cannot read, and :class:`~schedlab.errors.DataNotFoundError` for a missing file
        (:func:`timing_table_from_records` checks the measurements alike for every format).
    """

    description: str
    read: Callable[[Path, int | None], TimingTable]


#: Entry-point group of installed profile readers: ``name = "module:PROFILE_READER"``.
ENTRY_POINTS = "schedlab.profile_readers"

#: The profile formats by name: the built-in one, those of :func:`register_profile_reader`
#: and the installed ones (:class:`~schedlab.registry.Registry`).
PROFILE_READERS: Registry[ProfileReader] = Registry(
    "profile format",
    ProfileReader,
    ENTRY_POINTS,
    (
        (
            "timing-table",
            ProfileReader(
                "one CSV of per-op measurements (docs/profile-format.md)", read_timing_table
            ),
        ),
    ),
)

#: The format :func:`import_timing_table` reads unless told otherwise.
DEFAULT_READER = "timing-table"


def register_profile_reader(name: str, reader: ProfileReader) -> None:
    """Add a profile format under ``name`` (``PROFILE_READERS.register(name, reader)``).

    Raises
    ------
    RegistrationError
        If the name is taken or empty.
    InputTypeError
        For a ``reader`` that is no :class:`ProfileReader`.
    """
    PROFILE_READERS.register(name, reader)


def profile_reader_names() -> tuple[str, ...]:
    """The profile formats known: built-in, registered, then installed."""
    return PROFILE_READERS.names()


def get_profile_reader(name: str) -> ProfileReader:
    """The profile format registered or installed as ``name``.

    Raises
    ------
    UnknownNameError
        Listing the known formats.
    InputTypeError
        For an installed entry that is not a :class:`ProfileReader`.
    """
    return PROFILE_READERS.get(name)


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
    blank = dict.fromkeys(_KEY_COLUMNS, "")

    def add(degree: int, kind: str, keys: list[tuple[Any, ...]], times: np.ndarray) -> None:
        for key, time_us in sorted(zip(keys, times.tolist(), strict=True)):
            row = {**blank, **dict(zip(KINDS[kind], key, strict=True))}
            rows.append([degree, kind, *(row[c] for c in _KEY_COLUMNS), float(time_us)])
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
