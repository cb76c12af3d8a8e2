"""Reading and writing JSON the one way every part of schedlab does it.

:func:`read_json` turns the ways a file can be unreadable into one
:class:`~schedlab.errors.SchedlabError` naming the file (and, for invalid JSON, the line
and column); :func:`nan_to_null` prepares results for JSON, which has no NaN, and
:func:`plain` writes NumPy's numbers as the JSON values they stand for.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.errors import DataNotFoundError, FormatError

__all__ = ["nan_to_null", "parse_json", "plain", "read_json"]


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
    """The parsed content of the JSON file ``path``.

    Raises
    ------
    DataNotFoundError
        ``"{path}: no such {what}"`` if it does not exist.
    FormatError
        If ``path`` is not a path, or names a directory, a file the system cannot read
        (a name too long, no permission), or one that is not UTF-8 text or not strict
        JSON (:func:`parse_json`).
    """
    if not isinstance(path, str | os.PathLike):
        raise FormatError(f"{what}: expected a path, got {type(path).__name__}")
    path = Path(path)
    try:
        folder, found = path.is_dir(), path.is_file()
        text = path.read_text(encoding="utf-8") if found else ""
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text") from None
    except OSError as error:  # a name too long, no permission...
        raise FormatError(f"{path!s:.200}: cannot be read ({error.strerror})") from None
    if folder:
        raise FormatError(f"{path}: is a directory ({what} expected)")
    if not found:
        raise DataNotFoundError(f"{path}: no such {what}")
    return parse_json(text, str(path))


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
