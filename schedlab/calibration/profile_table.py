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
:func:`~schedlab.calibration.profile_exchange.import_timing_table` checks
them against the op layout of an architecture (:mod:`schedlab.calibration.layouts`), the
model's shape and the attention grid, and writes a profile directory that
:func:`~schedlab.calibration.fit.calibrate` reads, its ``meta.yaml`` recording where the
table came from (file, SHA-256, command);
:func:`~schedlab.calibration.profile_exchange.export_timing_table` writes a profile
directory's measurements back as one table. A time survives both ways exactly: it is
written in Python's shortest round-trip form (``repr``).

Every error is a :class:`~schedlab.errors.FormatError` (or, for the model and the
architecture, the error of their registries) naming the table and its line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from schedlab.calibration.deployment import MAX_TENSOR_PARALLEL
from schedlab.calibration.profiles import (
    check_attention_row,
    number_field,
    read_csv_rows,
    sha256_of,
    time_field,
)
from schedlab.calibration.table_checks import (
    Measurement,
    TimingTable,
    infer_architecture,
)
from schedlab.errors import FormatError, InputError
from schedlab.registry import Registry

__all__ = [
    "COLUMNS",
    "DEFAULT_READER",
    "ENTRY_POINTS",
    "KEY_COLUMNS",
    "KINDS",
    "PROFILE_READERS",
    "Measurement",
    "ProfileReader",
    "TimingTable",
    "get_profile_reader",
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
#: Columns that identify a measurement, in the order a timing table writes them.
KEY_COLUMNS: tuple[str, ...] = (
    "op",
    "tokens",
    "sequences",
    "activated_experts",
    "prefill_chunk",
    "kv_prefill",
    "n_decode",
    "kv_decode",
)
#: Every column of a timing table, in the order
#: :func:`~schedlab.calibration.profile_exchange.export_timing_table` writes them.
COLUMNS: tuple[str, ...] = ("tp", "kind", *KEY_COLUMNS, "time_us")
_OPTIONAL = ("tp", "activated_experts")
#: Size columns that count something present (at least 1).
_COUNTS = ("tokens", "sequences", "activated_experts")


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
        for column in KEY_COLUMNS:
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
    """A format of GPU timings that
    :func:`~schedlab.calibration.profile_exchange.import_timing_table` reads.

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

#: The format :func:`~schedlab.calibration.profile_exchange.import_timing_table` reads
#: unless told otherwise.
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
