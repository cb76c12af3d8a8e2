"""Schedule files: start rounds written by ``solve`` and read back by ``verify``.

Two forms, told apart by the file's suffix:

``.csv`` (:func:`write_schedule_csv`)
    One row a request, in request order::

        request,id,start,completion,prompt,output
        0,,3,7,12,4

    ``completion = start + output`` (``docs/design.md``, "Offline model"); ``id`` is the
    instance's request id (empty without one). Reading checks that ``prompt``, ``output``
    and ``completion`` agree with the instance, so a schedule of another instance is
    refused by name instead of being verified against the wrong requests.
``.json``
    A list of start rounds (entry ``i`` is request ``i``'s), an object with a
    ``"starts"`` list, a list of ``[request, start]`` pairs, or of
    ``{"request": i, "start": p}`` objects (``solve --json`` writes the object form).

Either reader returns what :func:`schedlab.offline.verify.verify` takes; it reports
duplicate, missing and unknown requests and infeasible starts itself (a schedule that does
not fit). An entry that is no integer (text, a float, a boolean, ``null``, a list) makes
the file no schedule at all: a :class:`~schedlab.errors.FormatError` naming the file and
the row.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from schedlab.errors import FormatError
from schedlab.json_files import check_size, read_json, write_text
from schedlab.offline.instance import Instance
from schedlab.offline.schedule import Schedule

__all__ = ["CSV_COLUMNS", "read_starts", "write_schedule_csv"]

#: The columns of a schedule CSV, in order.
CSV_COLUMNS: tuple[str, ...] = ("request", "id", "start", "completion", "prompt", "output")


def write_schedule_csv(schedule: Schedule, path: str | Path) -> Path:
    """Write ``schedule`` as a CSV of :data:`CSV_COLUMNS`, one row a request.

    Raises
    ------
    DataNotFoundError, FileAccessError
        (a ``FileNotFoundError``, an ``OSError``) if its folder does not exist or the
        system refuses (:func:`~schedlab.json_files.write_text`).
    """
    inst = schedule.instance
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for i, request in enumerate(inst.requests):
        start = int(schedule.starts[i])
        completion = int(schedule.completion[i])
        writer.writerow([i, request.id or "", start, completion, request.prompt, request.output])
    return write_text(path, buffer.getvalue(), "schedule file")


def read_starts(path: str | Path, instance: Instance) -> list[tuple[int, int]] | list[int]:
    """The start rounds in the schedule file ``path`` (module docs), for ``instance``.

    Raises
    ------
    DataNotFoundError
        If ``path`` does not exist.
    FormatError
        On a malformed file, or a CSV row whose lengths or completion disagree with
        ``instance``; the message names the file and the row.
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return _read_csv(path, instance)
    return _read_json(path)


def _read_csv(path: Path, instance: Instance) -> list[tuple[int, int]]:
    check_size(path, "schedule file")
    pairs: list[tuple[int, int]] = []
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # as Excel saves it
            reader = csv.DictReader(handle)
            header = list(reader.fieldnames or [])
            missing = [c for c in ("request", "start") if c not in header]
            if missing:
                raise FormatError(f"{path}:1: missing column(s) {', '.join(missing)}")
            twice = sorted({c for c in header if header.count(c) > 1})
            if twice:
                raise FormatError(f"{path}:1: column(s) {', '.join(twice)} given twice")
            for row in reader:
                place = f"{path}:{reader.line_num}"
                if None in row or None in row.values():
                    raise FormatError(f"{place}: expected {len(reader.fieldnames or [])} fields")
                request = _int(row["request"], place, "request")
                start = _int(row["start"], place, "start")
                if 0 <= request < instance.n:
                    _check_row(row, request, start, instance, place)
                pairs.append((request, start))
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:  # e.g. a field beyond the csv module's size limit
        raise FormatError(f"{path}: not a CSV file ({exc})") from None
    return pairs


def _int(text: str, place: str, column: str) -> int:
    """``text``, the ``column`` of the row at ``place``, as an integer.

    Raises
    ------
    FormatError
        If it is not one (a float such as ``3.0`` neither: a round is an integer).
    """
    try:
        return int(text.strip())
    except ValueError:
        raise FormatError(f"{place}: {column}: expected an integer, got {text!r}") from None


def _integer(value: Any, place: str) -> int:
    """A JSON value that must be an integer (``true`` and ``3.0`` are not)."""
    if type(value) is not int:
        raise FormatError(f"{place}: expected an integer, got {json.dumps(value)[:40]}")
    return value


def _check_row(row: dict[str, str], i: int, start: int, inst: Instance, place: str) -> None:
    request = inst.requests[i]
    for column, value in (("prompt", request.prompt), ("output", request.output)):
        given = row.get(column)
        if given not in (None, "") and _int(given, place, column) != value:
            raise FormatError(
                f"{place}: request {i}: {column} {given.strip()} differs from the instance's "
                f"{value}; is this the schedule of another instance?"
            )
    given = row.get("completion")
    if given not in (None, "") and _int(given, place, "completion") != start + request.output:
        raise FormatError(
            f"{place}: request {i}: completion {given.strip()} is not start + output "
            f"({start} + {request.output}); was the start or the completion edited?"
        )


def _read_json(path: Path) -> list[tuple[int, int]] | list[int]:
    data = read_json(path, "schedule file")
    if isinstance(data, dict):
        if "starts" not in data:
            raise FormatError(f"{path}: expected a list of starts or an object with 'starts'")
        data = data["starts"]
    if not isinstance(data, list):
        raise FormatError(f"{path}: starts: expected a list, got {type(data).__name__}")
    if data and all(isinstance(x, dict) for x in data):
        pairs = []
        for k, entry in enumerate(data):
            if "request" not in entry or "start" not in entry:
                raise FormatError(f"{path}: starts[{k}]: expected keys 'request' and 'start'")
            place = f"{path}: starts[{k}]"
            pairs.append(
                (
                    _integer(entry["request"], f"{place}.request"),
                    _integer(entry["start"], f"{place}.start"),
                )
            )
        return pairs
    if data and all(isinstance(x, list) and len(x) == 2 for x in data):
        return [
            (_integer(i, f"{path}: starts[{k}][0]"), _integer(p, f"{path}: starts[{k}][1]"))
            for k, (i, p) in enumerate(data)
        ]
    return [_integer(p, f"{path}: starts[{k}]") for k, p in enumerate(data)]
