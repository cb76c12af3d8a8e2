"""Seeded builders of offline instances (backlogs) from real length distributions.

* :func:`sample_backlog` — ``n`` requests drawn from one length source.
* :func:`mixed_backlog` — short chat (ShareGPT) mixed with long-document summarization
  (arXiv), the heterogeneous backlog the memory-constrained batching literature
  (Wang, Ye, Zhou, arXiv 2508.06133) evaluates on; ``long_fraction`` sets the mix.
* :func:`jaillet_instance` — the synthetic protocol of Jaillet et al. (arXiv
  2502.07115, section 6): ``M ~ U[30, 50]``, ``s ~ U[1, 5]``, ``o ~ U[1, M - s]``,
  ``n ~ U[40, 60]``, all integers, all requests released at round 0.

A length source is the name of a shipped :mod:`schedlab.llm.lengths` table (works without
any data files), a :class:`~schedlab.llm.lengths.LengthTable`, or a real
:class:`~schedlab.llm.traces.Trace` (rows are drawn with replacement). Requests whose peak
``s + o`` exceeds ``M`` are redrawn, so the lengths follow the source conditioned on
fitting in memory; ``meta["redrawn"]`` counts them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from schedlab.errors import InstanceError
from schedlab.llm.lengths import LengthTable, builtin_table
from schedlab.llm.models import BACKLOG_KV_TOKENS
from schedlab.llm.traces import Trace, check_lengths
from schedlab.offline.instance import Instance, check_int

__all__ = [
    "DEFAULT_KV_TOKENS",
    "MAX_REQUESTS",
    "LengthSource",
    "jaillet_instance",
    "mixed_backlog",
    "request_count",
    "sample_backlog",
    "sample_lengths",
    "source_label",
]

LengthSource = str | LengthTable | Trace

#: The most requests a generated backlog may have unless the caller raises it
#: (``max_requests``): an instance costs about 0.3 KB a request in memory, and every
#: solver more, so the default keeps one near a gigabyte.
MAX_REQUESTS = 2_000_000


def request_count(n: Any, max_requests: int) -> int:
    """``n`` checked, and refused beyond ``max_requests`` before anything is drawn."""
    n = check_int(n, "n", 1)
    if n > max_requests:
        raise InstanceError(
            f"n: {n:,} requests exceed the limit of {max_requests:,} (about "
            f"{0.3e-6 * n:,.1f} GB for the instance alone); raise it with --max-requests N "
            "(Python: max_requests=N)"
        )
    return n


#: KV budget ``M`` of the shipped backlogs (:data:`schedlab.llm.models.BACKLOG_KV_TOKENS`).
DEFAULT_KV_TOKENS = BACKLOG_KV_TOKENS

_MAX_REDRAWS = 1000


def _draw(source: LengthSource, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(source, str):
        source = builtin_table(source)
    if isinstance(source, LengthTable):
        return source.sample(n, rng)
    rows = rng.integers(0, len(source), n)
    return source.prompt[rows], source.output[rows]


def sample_lengths(
    source: LengthSource, n: int, kv_tokens: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, int]:
    """Draw ``n`` (prompt, output) pairs with ``prompt + output <= kv_tokens``.

    Returns the two ``int64`` arrays and the number of redrawn requests.

    Raises
    ------
    InstanceError
        If almost no draw fits in ``kv_tokens`` (the budget is too small for the source).
    """
    prompt, output = _draw(source, n, rng)
    redrawn = 0
    for _ in range(_MAX_REDRAWS):
        bad = np.flatnonzero(prompt + output > kv_tokens)
        if bad.size == 0:
            return prompt, output, redrawn
        redrawn += int(bad.size)
        prompt[bad], output[bad] = _draw(source, int(bad.size), rng)
    raise InstanceError(
        f"kv_tokens: M = {kv_tokens} is too small for nearly every request of the source"
    )


def source_label(source: LengthSource) -> str:
    """A length source's name for instance names and ``meta``: the table name, or the
    table's or trace's ``name`` (``"custom"`` without one)."""
    return source if isinstance(source, str) else getattr(source, "name", "custom")


def sample_backlog(
    n: int,
    kv_tokens: int | None = None,
    source: LengthSource = "sharegpt",
    seed: int = 0,
    name: str | None = None,
    *,
    max_requests: int = MAX_REQUESTS,
) -> Instance:
    """A backlog of ``n`` requests released at round 0, lengths drawn from ``source``
    (refused beyond ``max_requests``), with KV budget ``kv_tokens`` (default
    :data:`DEFAULT_KV_TOKENS`)."""
    n = request_count(n, max_requests)
    kv_tokens = check_int(DEFAULT_KV_TOKENS if kv_tokens is None else kv_tokens, "kv_tokens", 1)
    if isinstance(source, Trace):
        check_lengths(source, source.name, min_prompt=0)
    rng = np.random.default_rng(seed)
    prompt, output, redrawn = sample_lengths(source, n, kv_tokens, rng)
    label = source_label(source)
    meta = {"generator": "sample_backlog", "source": label, "seed": seed, "redrawn": redrawn}
    return Instance.from_arrays(
        kv_tokens, prompt, output, name=name or f"{label}-n{n}-s{seed}", meta=meta
    )


def mixed_backlog(
    n: int,
    kv_tokens: int | None = None,
    long_fraction: float = 0.5,
    seed: int = 0,
    chat: LengthSource = "sharegpt",
    long: LengthSource = "arxiv",
    name: str | None = None,
    *,
    max_requests: int = MAX_REQUESTS,
) -> Instance:
    """Short chat and long summarization requests, shuffled, released at round 0.

    ``round(long_fraction * n)`` requests come from ``long`` and the rest from ``chat``
    (refused beyond ``max_requests``); KV budget ``kv_tokens`` as :func:`sample_backlog`.
    """
    n = request_count(n, max_requests)
    kv_tokens = check_int(DEFAULT_KV_TOKENS if kv_tokens is None else kv_tokens, "kv_tokens", 1)
    if not 0.0 <= long_fraction <= 1.0:
        raise InstanceError(f"long_fraction: must be in [0, 1], got {long_fraction}")
    rng = np.random.default_rng(seed)
    n_long = round(long_fraction * n)
    p_chat, o_chat, r_chat = sample_lengths(chat, n - n_long, kv_tokens, rng)
    p_long, o_long, r_long = sample_lengths(long, n_long, kv_tokens, rng)
    perm = rng.permutation(n)
    prompt = np.concatenate([p_chat, p_long])[perm]
    output = np.concatenate([o_chat, o_long])[perm]
    meta: dict[str, Any] = {
        "generator": "mixed_backlog",
        "seed": seed,
        "long_fraction": long_fraction,
        "n_long": n_long,
        "redrawn": r_chat + r_long,
    }
    return Instance.from_arrays(
        kv_tokens, prompt, output, name=name or f"mixed-n{n}-s{seed}", meta=meta
    )


def jaillet_instance(
    seed: int = 0,
    n: int | None = None,
    name: str | None = None,
    *,
    shared_prompt: bool = False,
    max_requests: int = MAX_REQUESTS,
) -> Instance:
    """One instance of Jaillet et al.'s synthetic protocol (``n`` drawn if ``None``).

    ``M ~ U[30, 50]``, ``n ~ U[40, 60]``, ``s ~ U[1, 5]``, ``o_i ~ U[1, M - s]`` (integers,
    inclusive), all requests released at round 0. With ``shared_prompt=False`` every
    request draws its own ``s_i``; with ``True`` one ``s`` is drawn for the instance, as in
    the code published with the paper (``MC-SF_synthetic.py`` and ``Hindsight_IP.py`` of
    github.com/anonymouspeople111/neurips2025-code take one prompt size per instance) and
    in the setting of its O(1) guarantee (equal prompts). ``M`` and ``n`` are the same for
    a seed either way.
    """
    rng = np.random.default_rng(seed)
    kv_tokens = int(rng.integers(30, 51))
    count = int(rng.integers(40, 61)) if n is None else request_count(n, max_requests)
    if shared_prompt:
        shared = int(rng.integers(1, 6))
        prompt: np.ndarray = np.full(count, shared, dtype=np.int64)
        output = rng.integers(1, kv_tokens - shared + 1, count)
    else:
        prompt = rng.integers(1, 6, count)
        output = np.array(
            [rng.integers(1, kv_tokens - s + 1) for s in prompt.tolist()], dtype=np.int64
        )
    meta = {
        "generator": "jaillet_instance",
        "seed": seed,
        "shared_prompt": shared_prompt,
        "protocol": "Jaillet et al. 2025, §6",
    }
    kind = "jaillet-shared" if shared_prompt else "jaillet"
    return Instance.from_arrays(
        kv_tokens, prompt, output, name=name or f"{kind}-n{count}-s{seed}", meta=meta
    )
