"""Reading and writing JSON the one way every part of schedlab does it.

:func:`read_json` turns the ways a file can be unreadable into one
:class:`~schedlab.errors.SchedlabError` naming the file (and, for invalid JSON, the line
and column); :func:`nan_to_null` prepares results for JSON, which has no NaN.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from schedlab.errors import DataNotFoundError, FormatError

__all__ = ["nan_to_null", "read_json"]


def read_json(path: str | Path, what: str = "file") -> Any:
    """The parsed content of the JSON file ``path``.

    Raises
    ------
    DataNotFoundError
        ``"{path}: no such {what}"`` if it does not exist.
    FormatError
        If it is not UTF-8 text or not valid JSON (with line and column).
    """
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such {what}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON ({exc.msg})") from None
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text") from None


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
