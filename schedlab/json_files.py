"""Reading files and JSON, and writing them, the one way every part of schedlab does it.

:func:`read_bytes` (and :func:`read_text`) turn the ways a file can be unreadable into one
:class:`~schedlab.errors.SchedlabError` naming the file, refuse a file above a size cap
(:data:`MAX_FILE_BYTES`; :func:`check_size` for readers that stream a file line by line)
and read standard input for ``-`` and ``/dev/stdin``; :func:`read_json` parses strict JSON
naming the line and column of an error; :func:`check_keys` refuses unknown keys of an
object by name; :func:`json_number`, :func:`json_numbers` and :func:`json_integer` take
the numbers of a parsed file (finite, no bool or numeric string, integers in range);
:func:`write_text` writes a file with the same typed errors.
:func:`nan_to_null` prepares results for JSON, which has no NaN, and :func:`plain` writes
NumPy's numbers as the JSON values they stand for.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.errors import DataNotFoundError, FileAccessError, FormatError, InputTypeError

__all__ = [
    "MAX_FILE_BYTES",
    "STDIN_NAMES",
    "check_keys",
    "check_size",
    "is_stdin",
    "json_integer",
    "json_number",
    "json_numbers",
    "nan_to_null",
    "parse_json",
    "plain",
    "read_bytes",
    "read_json",
    "read_text",
    "write_text",
]

#: The largest file any reader of schedlab takes (bytes, 1 GiB): an instance of 10**7
#: requests, the largest trace or profile published, fit far below it; a larger file is
#: refused in one line before it is read, instead of filling the machine's memory.
MAX_FILE_BYTES = 2**30

#: The path names that read standard input.
STDIN_NAMES = ("-", "/dev/stdin")


def is_stdin(path: Any) -> bool:
    """Whether ``path`` names standard input (:data:`STDIN_NAMES`)."""
    return isinstance(path, str | os.PathLike) and os.fspath(path) in STDIN_NAMES


def _check_path(path: Any, what: str) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise InputTypeError(f"{what}: expected a path, got {type(path).__name__}")
    return Path(path)


def _too_large(path: Any, size: int, limit: int, what: str) -> FileAccessError:
    return FileAccessError(
        f"{path}: {size:,} bytes or more, larger than the {limit:,} bytes a {what} may "
        "have (schedlab.json_files.MAX_FILE_BYTES)"
    )


def check_size(path: str | Path, what: str = "file", limit: int | None = None) -> Path:
    """``path`` if it is an existing file of at most ``limit`` bytes (default
    :data:`MAX_FILE_BYTES`, read when called); readers that stream a file line by line
    call it before they open it.

    Raises
    ------
    DataNotFoundError
        ``"{path}: no such {what}"`` if it does not exist.
    FormatError
        If it is a directory.
    FileAccessError
        If it is larger than ``limit``, or cannot be looked at (no permission...).
    """
    path = _check_path(path, what)
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        folder, found = path.is_dir(), path.exists()
        size = path.stat().st_size if found else 0
    except OSError as error:  # a name too long, no permission...
        raise FileAccessError(f"{path!s:.200}: cannot be read ({error.strerror})") from None
    if folder:
        raise FormatError(f"{path}: is a directory ({what} expected)")
    if not found:
        raise DataNotFoundError(f"{path}: no such {what}")
    if size > limit:
        raise _too_large(path, size, limit, what)
    return path


def read_bytes(path: str | Path, what: str = "file", limit: int | None = None) -> bytes:
    """The content of ``path``, at most ``limit`` bytes (:func:`check_size`); ``-`` and
    ``/dev/stdin`` read standard input, and a pipe or device is read as a file is (up to
    the cap).

    Raises
    ------
    InputTypeError
        If ``path`` is not a path.
    DataNotFoundError
        ``"{path}: no such {what}"`` if it does not exist.
    FormatError
        If it names a directory.
    FileAccessError
        If it is larger than ``limit`` or the system cannot read it (a name too long, no
        permission).
    """
    path = _check_path(path, what)
    limit = MAX_FILE_BYTES if limit is None else limit
    if is_stdin(path):
        data = sys.stdin.buffer.read(limit + 1)
    else:
        check_size(path, what, limit)
        try:
            with path.open("rb") as handle:  # a pipe or device has no size to check first
                data = handle.read(limit + 1)
        except OSError as error:
            raise FileAccessError(f"{path!s:.200}: cannot be read ({error.strerror})") from None
    if len(data) > limit:
        raise _too_large(path, len(data), limit, what)
    return data


def read_text(path: str | Path, what: str = "file", limit: int | None = None) -> str:
    """:func:`read_bytes` decoded as UTF-8.

    Raises
    ------
    FormatError
        If it is not UTF-8 text; else as :func:`read_bytes`.
    """
    try:
        return read_bytes(path, what, limit).decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text") from None


def write_text(path: str | Path, text: str, what: str = "file") -> Path:
    """Write ``text`` to ``path`` as UTF-8, line ends as they are; ``-`` writes it to
    standard output.

    Raises
    ------
    DataNotFoundError
        (a ``FileNotFoundError``) if the folder to write in does not exist.
    FileAccessError
        (an ``OSError``) if the system refuses (no permission, a directory, a name too long).
    """
    path = _check_path(path, what)
    if os.fspath(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return path
    try:
        path.write_text(text, encoding="utf-8", newline="")  # the text as it is
    except FileNotFoundError:
        raise DataNotFoundError(
            f"{path}: no folder {path.parent} to write the {what} in"
        ) from None
    except OSError as error:
        raise FileAccessError(f"{path!s:.200}: cannot be written ({error.strerror})") from None
    return path


def text_field(data: Mapping[str, Any], key: str, default: str, where: str) -> str:
    """The text at ``data[key]`` (``default`` when absent).

    Raises
    ------
    FormatError
        ``"{where}: {key}: expected text, got ..."`` for a value that is not a string
        (a name of ``[]`` or ``true`` would otherwise be printed as one).
    """
    value = data.get(key, default)
    if not isinstance(value, str):
        raise FormatError(f"{where}: {key}: expected text, got {value!r}")
    return value


def json_number(value: Any, where: str) -> float:
    """``value`` as a float if it is a finite JSON number: an ``int`` or ``float`` as the
    parser gives one. A bool (``true``), text (``"1e-3"``, ``"1/3"``: ``float`` would take
    the first) and ``null`` are no number; an integer beyond the float range is not finite.

    Raises
    ------
    FormatError
        ``"{where}: expected a finite number, got ..."``.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer of more than 308 digits
            number = math.inf
        if math.isfinite(number):
            return number
    raise FormatError(f"{where}: expected a finite number, got {value!r:.60}")


def json_numbers(values: Any, where: str) -> tuple[float, ...]:
    """A JSON list of finite numbers (:func:`json_number`); an error names the index,
    ``{where}[k]``.

    Raises
    ------
    FormatError
        If ``values`` is not a list, or an item is not a finite number.
    """
    if not isinstance(values, list | tuple):
        raise FormatError(f"{where}: expected a list of numbers, got {values!r:.60}")
    return tuple(json_number(value, f"{where}[{k}]") for k, value in enumerate(values))


def json_integer(value: Any, where: str, minimum: int, maximum: int) -> int:
    """``value`` if it is a JSON integer (not a bool, not ``4.0``) from ``minimum`` to
    ``maximum``: every integer a file gives is bounded before it reaches NumPy or C.

    Raises
    ------
    FormatError
        ``"{where}: expected an integer from ... to ..., got ..."``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise FormatError(
            f"{where}: expected an integer from {minimum:,} to {maximum:,}, got {value!r:.60}"
        )
    return value


def check_keys(data: Mapping[str, Any], known: Collection[str], where: str) -> None:
    """Refuse keys of the object ``data`` outside ``known``, naming them (a misspelt key,
    ``"margn_s"``, would otherwise be ignored and its default used without a word).

    Raises
    ------
    FormatError
        ``"{where}: unknown key(s) ...; known: ..."``.
    """
    unknown = sorted(str(key) for key in data if key not in known)
    if unknown:
        raise FormatError(
            f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members as a dict, refusing a key given twice (``json`` would keep
    the last one silently)."""
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"key {key!r} given twice in one object")
        obj[key] = value
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (write a number or null)")


def parse_json(text: str, where: str, first_line: int = 1) -> Any:
    """``text`` parsed as strict JSON: no key twice in one object, no ``NaN`` or
    ``Infinity`` (Python's ``json`` accepts both, neither is JSON: RFC 8259, sections 4
    and 6).

    Raises
    ------
    FormatError
        Naming ``where`` (and line and column where the parser knows them, counting
        ``text``'s first line as ``first_line``: a JSONL file's line number), also for
        nesting too deep to parse and for a string holding half of a UTF-16 surrogate
        pair (``"\\ud800"``: valid JSON syntax, but no text: it cannot be written out).
    """
    # a one-line text (a JSONL line) is wholly on its line; in a file, the parser's hooks
    # do not know where they are
    place = f"{where}:{first_line}" if "\n" not in text.strip() else where
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        line = first_line + exc.lineno - 1
        raise FormatError(f"{where}:{line}:{exc.colno}: invalid JSON ({exc.msg})") from None
    except ValueError as exc:  # a duplicate key or a non-JSON constant
        raise FormatError(f"{place}: invalid JSON ({exc})") from None
    except RecursionError:
        raise FormatError(f"{place}: invalid JSON (nested too deeply)") from None
    if "\\u" in text:  # only an escape can make a lone surrogate
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise FormatError(f"{place}: invalid JSON (a string holds a lone surrogate)") from None
    return data


def read_json(path: str | Path, what: str = "file") -> Any:
    """The parsed content of the JSON file ``path`` (``-``: standard input).

    Raises
    ------
    DataNotFoundError, FormatError, FileAccessError, InputTypeError
        As :func:`read_text`; also a ``FormatError`` if it is not strict JSON
        (:func:`parse_json`).
    """
    return parse_json(read_text(path, what), str(path))


def nan_to_null(obj: Any) -> Any:
    """``obj`` with every float NaN inside dicts, lists and tuples replaced by ``None``
    (JSON ``null``)."""
    if isinstance(obj, dict):
        return {k: nan_to_null(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [nan_to_null(v) for v in obj]
    if isinstance(obj, float) and math.isnan(obj):
        return None
    return obj


def plain(value: Any) -> Any:
    """NumPy scalars and arrays as the JSON values they stand for (``json.dumps``'s
    ``default``); anything else is refused as not JSON-ready (``TypeError``)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-ready")


def string_keys(value: Any, _open: frozenset[int] = frozenset()) -> None:
    """Refuse (``TypeError``) a dict inside ``value`` (dicts, lists, tuples, NumPy object
    arrays) keyed by anything but strings: JSON keys are strings, so ``{1: x}`` would be
    written as ``{"1": x}`` and read back other than it was. A container inside itself is
    left for ``json.dumps`` to name (``_open``: the containers being walked)."""
    if id(value) in _open:
        return
    if isinstance(value, np.ndarray):
        items: Any = value.flat if value.dtype == object else ()  # 0-d too
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"key {key!r} is not a string (JSON keys are strings)")
        items = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return
    inner = _open | {id(value)}
    for item in items:
        string_keys(item, inner)
