"""A read timing table (:class:`TimingTable`), and its checks against an op layout, a
model and the attention grid.

What :func:`~schedlab.calibration.profile_exchange.import_timing_table` checks before it
writes a profile directory: the architecture whose op layout has the table's ops
(:func:`infer_architecture`), each op the layout needs at two sizes or more
(:func:`check_ops`), an attention grid with no hole (:func:`check_grid`) and the expert
block's rows (:func:`check_experts`). Each error is a
:class:`~schedlab.errors.FormatError` naming the table (and its line where one row is
wrong).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from schedlab.calibration.attention_grid import select_grid
from schedlab.calibration.layouts import LAYOUTS, OpLayout
from schedlab.calibration.profiles import AttentionRows
from schedlab.errors import FormatError
from schedlab.llm.models import get_model_shape

__all__ = [
    "HOLES_BELOW",
    "Measurement",
    "TimingTable",
    "check_experts",
    "check_grid",
    "check_ops",
    "infer_architecture",
]

#: A grid level lacking fewer than this share of its points is a grid with holes, refused
#: (:func:`~schedlab.calibration.attention_grid.select_grid`), not a level left out: the
#: shared profiles' levels off the grid lack three quarters of their points or more.
HOLES_BELOW = 0.5


@dataclass(frozen=True)
class Measurement:
    """One row of a timing table.

    Attributes
    ----------
    line
        Line number in the table.
    key
        The row's identifying values, in the order of its kind's columns
        (:data:`~schedlab.calibration.profile_table.KINDS`; ``("qkv_proj", 128)`` for a
        dense row).
    time_us
        Measured time in microseconds, ``> 0``.
    """

    line: int
    key: tuple[str | int, ...]
    time_us: float


@dataclass(frozen=True)
class TimingTable:
    """A read timing table.

    Attributes
    ----------
    path
        The file read.
    sha256
        Hex SHA-256 of its bytes.
    parts
        ``(tp, kind) -> measurements`` in file order.
    """

    path: Path
    sha256: str
    parts: Mapping[tuple[int, str], tuple[Measurement, ...]]

    @property
    def tps(self) -> tuple[int, ...]:
        """The tensor-parallel degrees of the rows, increasing."""
        return tuple(sorted({tp for tp, _ in self.parts}))

    def rows(self, tp: int, kind: str) -> tuple[Measurement, ...]:
        """The measurements of one kind at one degree (empty if none)."""
        return self.parts.get((tp, kind), ())

    def by_op(self, tp: int, kind: str) -> dict[str, list[Measurement]]:
        """The ``dense`` or ``per_sequence`` measurements of one degree, by op name."""
        ops: dict[str, list[Measurement]] = {}
        for row in self.rows(tp, kind):
            ops.setdefault(str(row.key[0]), []).append(row)
        return ops

    def __len__(self) -> int:
        return sum(len(rows) for rows in self.parts.values())


def infer_architecture(table: TimingTable) -> str:
    """The architecture whose op layout has exactly the table's ops (all degrees).

    Raises
    ------
    FormatError
        If no layout, or more than one, has them.
    """
    dense = {op for tp in table.tps for op in table.by_op(tp, "dense")}
    heads = {op for tp in table.tps for op in table.by_op(tp, "per_sequence")}
    experts = any(table.rows(tp, "moe") for tp in table.tps)
    matches = [
        name
        for name, layout in sorted(LAYOUTS.items())
        if set(layout.dense_ops) == dense
        and set(layout.per_sequence) == heads
        and layout.experts == experts
    ]
    if len(matches) != 1:
        raise FormatError(
            f"{table.path}: its ops ({', '.join(sorted(dense | heads))}"
            f"{', moe rows' if experts else ''}) are those of "
            f"{'no op layout' if not matches else 'several op layouts: ' + ', '.join(matches)}"
            f" (known: {', '.join(sorted(LAYOUTS))}); give the architecture (--architecture) "
            "to see what is missing"
        )
    return matches[0]


def check_ops(table: TimingTable, tp: int, architecture: str, layout: OpLayout) -> None:
    """Every op the layout needs, at two sizes or more, and no other op."""
    for kind, names in (("dense", layout.dense_ops), ("per_sequence", layout.per_sequence)):
        ops = table.by_op(tp, kind)
        missing = [op for op in names if op not in ops]
        if missing:
            raise FormatError(
                f"{table.path}: tp{tp}: no {kind} rows for op(s) {', '.join(missing)}, which "
                f"the {architecture!r} layout needs (schedlab.calibration.layouts)"
            )
        for op, rows in ops.items():
            if op not in names:
                raise FormatError(
                    f"{table.path}:{rows[0].line}: {kind} op {op!r} is not in the "
                    f"{architecture!r} layout (its {kind} ops: {', '.join(names)})"
                )
            if len(rows) < 2:
                raise FormatError(
                    f"{table.path}:{rows[0].line}: {kind} op {op!r} of tp{tp} is measured at "
                    "one size only; a curve needs two sizes or more"
                )


def _attention_rows(rows: Sequence[Measurement]) -> AttentionRows:
    data = np.array([[*row.key, row.time_us] for row in rows], dtype=float)
    return AttentionRows(*(data[:, j].copy() for j in range(5)))


def check_grid(
    table: TimingTable, tp: int, declared: tuple[list[float], list[float], list[float]] | None
) -> tuple[list[float], list[float], list[float], list[float]]:
    """The axes of the attention grid calibrate will use at ``tp``
    (:func:`~schedlab.calibration.attention_grid.select_grid`)."""
    rows = table.rows(tp, "attention")
    if not rows:
        raise FormatError(f"{table.path}: tp{tp}: no attention rows")
    try:
        return select_grid(_attention_rows(rows), declared, holes_below=HOLES_BELOW)
    except FormatError as exc:
        raise FormatError(
            f"{table.path}: tp{tp}: the attention rows hold no complete grid ({exc}): a grid "
            "needs prefill-only rows for every chunk and cached-token level, decode-only rows "
            "for every decode count and KV level, and mixed rows for every combination"
            + (" of the declared levels" if declared else "")
        ) from None


def check_experts(
    table: TimingTable, tp: int, architecture: str, layout: OpLayout, model: str
) -> None:
    """The expert block's rows: where the layout has one (at ``tp``, else tp1), at two
    token counts or more and within the model's experts; nowhere else."""
    rows = table.rows(tp, "moe")
    if not layout.experts:
        if rows:
            raise FormatError(
                f"{table.path}:{rows[0].line}: moe row, but the {architecture!r} layout has "
                "no expert block"
            )
        return
    rows = rows or table.rows(1, "moe")
    if not rows:
        raise FormatError(
            f"{table.path}: tp{tp}: no moe rows (at tp{tp} or tp1) for the expert block of "
            f"the {architecture!r} layout"
        )
    experts = get_model_shape(model).experts
    if experts < 1:
        raise FormatError(
            f"{table.path}: model {model} has no experts in its shape (schedlab.llm.models), "
            f"but the {architecture!r} layout has an expert block"
        )
    for row in rows:
        if int(row.key[1]) > experts:
            raise FormatError(
                f"{table.path}:{row.line}: activated_experts: {row.key[1]} is more than the "
                f"{experts} experts of {model}"
            )
    if len({row.key[0] for row in rows}) < 2:
        raise FormatError(
            f"{table.path}:{rows[0].line}: moe rows at one token count only; the expert "
            "block needs two or more"
        )
