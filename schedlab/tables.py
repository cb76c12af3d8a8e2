"""Tables of results as CSV and as pandas DataFrames: the one way every result does it.

A result that is a table or a summary (:class:`~schedlab.offline.report.Report`,
:class:`~schedlab.serving.metrics.Summary`, a
:class:`~schedlab.serving.capacity.SweepPoint`...) gives its rows as flat dicts of plain
values, with any unit in the column name (``ttft_p50_s``, ``rate_rps``); :func:`rows_to_csv`
writes such rows with the standard csv module (plain numbers: no thousands separators, no
units in cells; a missing or NaN value is an empty cell), and :func:`to_pandas` makes
them a :class:`pandas.DataFrame` (pandas is a dependency).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from schedlab.errors import SchedlabError

__all__ = ["require_pandas", "rows_to_csv", "to_pandas"]


def _cell(value: Any) -> Any:
    """A CSV cell: ``None`` and NaN are empty; anything else as the csv module writes it."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def rows_to_csv(rows: Sequence[Mapping[str, Any]], handle: TextIO | None = None) -> str:
    """Rows with the same keys as CSV text, a header line first (also written to
    ``handle`` if given); no rows: an empty text."""
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows({key: _cell(value) for key, value in row.items()} for row in rows)
    if handle is not None:
        handle.write(buffer.getvalue())
    return buffer.getvalue()


def require_pandas() -> Any:
    """The pandas module.

    Raises
    ------
    SchedlabError
        In one line saying how to install it, if pandas is not installed.
    """
    try:
        import pandas
    except ImportError:
        raise SchedlabError(
            "to_pandas: pandas is not installed, though schedlab depends on it; pip install pandas"
        ) from None
    return pandas


def to_pandas(rows: Sequence[Mapping[str, Any]]) -> Any:
    """Rows with the same keys as a :class:`pandas.DataFrame`, one row each, the columns
    in the rows' order (``None`` is kept as missing)."""
    pandas = require_pandas()
    columns = list(rows[0]) if rows else []
    return pandas.DataFrame([dict(row) for row in rows], columns=columns)
