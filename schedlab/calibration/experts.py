r"""One layer's mixture-of-experts block: time for ``T`` tokens, from the profile's grid.

LLMServingSim's profiler times a model's sparse block (router gate and fused experts) for
``T`` tokens routed to exactly ``A`` distinct experts, each activated expert receiving
:math:`T k / A` tokens (``moe.csv``; ``profiler/core/hooks/moe_hook.py`` forces the routing
``t k + o mod A``). A real batch does not choose ``A``: with top-``k`` routing over ``E``
experts, each token picks ``k`` distinct experts, so under uniform independent routing one
expert is missed by one token with probability :math:`1 - k/E` and by all ``T`` of them
with :math:`(1-k/E)^T`; by linearity of expectation the expected number of distinct
experts activated is

.. math:: \mathbb{E}[A] = E \left(1 - \left(1 - \frac{k}{E}\right)^{T}\right),

at most :math:`\min(E, kT)`. (By Jensen's inequality, a gate that favours some experts
activates fewer on average: the uniform figure is an upper bound.) With expert
parallelism over ``ep`` GPUs each holds :math:`E/ep` experts and gets, on average,
:math:`Tk/ep` of the token-expert pairs, the load of :math:`T/ep` tokens: its block is
timed as :math:`T/ep` tokens on :math:`(E/ep)(1-(1-k/E)^T)` experts.

The measured grid (tokens :math:`1, 2, 4, \dots`; experts :math:`8, 16, \dots, E`, at most
:math:`kT`) is made non-decreasing along both axes (isotonic along ``A``, then a running
maximum along ``T``) and interpolated linearly in ``A`` within a row and in ``T`` between
rows; ``A`` is clamped to a row's range, ``T`` below the first row to it, and beyond the
last row the time grows linearly with the per-token slope of the last two rows.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from schedlab.calibration.profiles import MoERows
from schedlab.errors import FormatError
from schedlab.json_files import json_integer, json_number, json_numbers

__all__ = ["MAX_EXPERTS", "ExpertTable", "expected_experts"]

#: The most routed experts (and experts per token) a cost model's table may name: eight
#: times the largest published count (512, Qwen3-Next), so only a wrong value passes it.
MAX_EXPERTS = 4096


def expected_experts(tokens: float, experts: int, top_k: int) -> float:
    """:math:`E (1 - (1 - k/E)^T)`, the expected distinct experts of ``tokens`` tokens."""
    if tokens <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def _row_value(activated: tuple[float, ...], times: tuple[float, ...], a: float) -> float:
    if a <= activated[0]:
        return times[0]
    if a >= activated[-1]:
        return times[-1]
    j = bisect_right(activated, a) - 1
    t = (a - activated[j]) / (activated[j + 1] - activated[j])
    return times[j] + t * (times[j + 1] - times[j])


@dataclass(frozen=True)
class ExpertTable:
    """The expert block's time :math:`B(T)` in microseconds (module docstring).

    Attributes
    ----------
    experts, top_k
        ``E`` and ``k`` of the model.
    tokens
        Row sizes, increasing.
    rows
        For each row, ``(activated experts, times)``: both increasing.
    """

    experts: int
    top_k: int
    tokens: tuple[float, ...]
    rows: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...]

    def __post_init__(self) -> None:
        if not 1 <= self.top_k <= self.experts:
            raise ValueError(f"ExpertTable: need 1 <= top_k <= experts, got {self.top_k}")
        if len(self.tokens) != len(self.rows) or len(self.tokens) < 2:
            raise ValueError("ExpertTable: needs at least two rows, one per token size")
        for (a, t), size in zip(self.rows, self.tokens, strict=True):
            if not a or len(a) != len(t) or any(np.diff(a) <= 0) or any(np.diff(t) < 0):
                raise ValueError(f"ExpertTable: row {size:g} must increase in experts and time")

    @classmethod
    def fit(cls, rows: MoERows, experts: int, top_k: int) -> ExpertTable:
        """The monotone table of a profile's ``moe.csv`` (module docstring)."""
        from scipy.optimize import isotonic_regression

        sizes = np.unique(rows.tokens)
        fitted: list[tuple[tuple[float, ...], tuple[float, ...]]] = []
        previous: np.ndarray | None = None
        previous_a: np.ndarray | None = None
        for size in sizes:
            mine = rows.tokens == size
            order = np.argsort(rows.activated[mine])
            a = rows.activated[mine][order]
            t = isotonic_regression(rows.time_us[mine][order]).x
            if previous is not None and previous_a is not None:
                # a running maximum along T: never faster than the smaller row at any A
                floor = np.interp(a, previous_a, previous)
                t = np.maximum(t, floor)
            fitted.append((tuple(a.tolist()), tuple(np.round(t, 4).tolist())))
            previous, previous_a = t, a
        return cls(experts, top_k, tuple(sizes.tolist()), tuple(fitted))

    def time_us(self, tokens: float, activated: float) -> float:
        """Time of ``tokens`` tokens on ``activated`` experts (interpolated)."""
        sizes = self.tokens
        if tokens <= sizes[0]:
            return _row_value(*self.rows[0], activated)
        if tokens >= sizes[-1]:
            last = _row_value(*self.rows[-1], activated)
            before = _row_value(*self.rows[-2], activated)
            slope = max(0.0, (last - before) / (sizes[-1] - sizes[-2]))
            return last + slope * (tokens - sizes[-1])
        i = bisect_right(sizes, tokens) - 1
        low = _row_value(*self.rows[i], activated)
        high = _row_value(*self.rows[i + 1], activated)
        t = (tokens - sizes[i]) / (sizes[i + 1] - sizes[i])
        return low + t * (high - low)

    def __call__(self, tokens: float, ep: int = 1) -> float:
        """The block's time for a batch of ``tokens`` tokens on one of ``ep`` GPUs."""
        if tokens <= 0:
            return 0.0
        local = expected_experts(tokens, self.experts, self.top_k) / ep
        return self.time_us(max(tokens / ep, 1.0), max(local, 1.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "experts": self.experts,
            "top_k": self.top_k,
            "rows": [
                {"tokens": size, "activated": list(a), "time_us": list(t)}
                for size, (a, t) in zip(self.tokens, self.rows, strict=True)
            ],
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ExpertTable:
        """Validate and build from :meth:`to_dict`'s form; errors name ``where``."""
        if not isinstance(data, Mapping):
            raise FormatError(f"{where}: expected an object")
        try:
            rows = data["rows"]
            places = [f"{where}.rows[{k}]" for k in range(len(rows))]
            return cls(
                json_integer(data["experts"], f"{where}.experts", 1, MAX_EXPERTS),
                json_integer(data["top_k"], f"{where}.top_k", 1, MAX_EXPERTS),
                tuple(
                    json_number(r["tokens"], f"{p}.tokens")
                    for r, p in zip(rows, places, strict=True)
                ),
                tuple(
                    (
                        json_numbers(r["activated"], f"{p}.activated"),
                        json_numbers(r["time_us"], f"{p}.time_us"),
                    )
                    for r, p in zip(rows, places, strict=True)
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, FormatError):  # names its place already
                raise
            raise FormatError(f"{where}: {exc}") from None
