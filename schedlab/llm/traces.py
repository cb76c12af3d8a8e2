"""Readers for real LLM request traces.

Four shapes are understood (see ``../shared/data/README.md``):

``azure``
    Azure LLM inference trace CSV: ``TIMESTAMP, ContextTokens, GeneratedTokens``
    (Patel et al., "Splitwise", ISCA 2024; CC-BY-4.0).
``length-stats``
    Vidur / etalon length-statistics CSV: ``num_prefill_tokens, num_decode_tokens, ...``
    (no arrival times).
``mooncake``
    Mooncake-style JSONL, one object a line with ``timestamp`` (milliseconds),
    ``input_length`` and ``output_length``, and optionally ``hash_ids`` (Qin et al.,
    "Mooncake", FAST 2025): the chain ids of the prompt's blocks of
    :data:`MOONCAKE_BLOCK_TOKENS` tokens, the last one partial, kept in
    :attr:`Trace.hash_ids` (:mod:`schedlab.serving.prefix` says what they mean). If any
    line has them, every line must: :math:`\\lceil L / 512 \rceil` non-negative integers
    for ``input_length`` :math:`L`, each id at the same block position and after the
    same id wherever it appears (an id names the whole prefix up to its block), each at
    most :data:`MAX_HASH_ID`: Mooncake's ids are "remapped block hash[es]"
    (``FAST25-release/README.md``), numbered from 0 (the shared synthetic trace's run
    from 0 to 43,923), so a larger one is no id of the format.
``vllm-bench``
    A recorded vLLM run's ``requests.jsonl`` (LLMServingSim's ``bench`` format):
    ``input_toks, output_toks, arrival_time`` (epoch seconds) and, where measured,
    ``queued_ts, scheduled_ts, first_token_ts, last_token_ts`` (monotonic seconds), kept
    in :attr:`Trace.extra`.
``vllm-bench-serve``
    The JSON that ``vllm bench serve --save-result`` writes (field names from
    ``vllm/benchmarks/serve.py``, lines 993–999): per request ``input_lens`` and
    ``output_lens``; with ``--save-detailed`` also ``start_times`` (when each request was
    sent, ``time.perf_counter`` seconds: the arrivals; some versions do not save them),
    ``ttfts`` (seconds) and ``itls`` (each request's gaps between tokens, seconds), kept
    in :attr:`Trace.extra` as ``ttft_s`` and ``decode_s`` (the sum of the gaps) when all
    three are there. Without ``start_times`` the trace has lengths only. Failed requests
    (an ``errors`` entry, or no output) are left out.

Every reader returns a :class:`Trace` with arrival times in seconds relative to the
first request, and raises :class:`~schedlab.errors.FormatError` naming the file and
line of the first malformed value. Timestamps must be finite, ``>= 0`` and at most
:data:`MAX_TIMESTAMP_S`; an arrival log (``azure``, ``mooncake``) lists its requests in
time order, so a timestamp before the one of the line before is refused (a log out of
order is a wrong file or column; sorting it would hide that, and a replay never re-sorts);
a vLLM run's timestamps of one request must follow each other, ``queued_ts <=
scheduled_ts <= first_token_ts <= last_token_ts`` (:func:`check_request_times`), though
its requests may be listed in any order. Files are read under the size cap of
:func:`schedlab.json_files.check_size`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import pairwise
from pathlib import Path

import numpy as np

from schedlab.errors import FormatError, UnknownNameError
from schedlab.json_files import check_size, json_integer, parse_json, read_json

__all__ = [
    "MAX_HASH_ID",
    "MAX_TIMESTAMP_S",
    "MAX_TOKENS",
    "MOONCAKE_BLOCK_TOKENS",
    "TRACE_KINDS",
    "Trace",
    "check_lengths",
    "check_request_times",
    "check_time_order",
    "detect_kind",
    "jsonl_rows",
    "read_trace",
    "time_field",
]


@dataclass(frozen=True)
class Trace:
    """Request lengths (and arrival times) read from a real trace.

    Attributes
    ----------
    name
        The file's stem.
    prompt, output
        Prompt and output token counts, ``int64`` arrays of equal length.
    arrival_s
        Arrival times in seconds from the first request (sorted order is *not*
        imposed), or ``None`` for traces without timestamps.
    extra
        Further numeric columns by name (e.g. the measured timestamps of a vLLM run).
    hash_ids, hash_block_tokens
        Per request the chain ids of its prompt's blocks of ``hash_block_tokens`` tokens
        (Mooncake's ``hash_ids``), or ``None``.
    """

    name: str
    prompt: np.ndarray
    output: np.ndarray
    arrival_s: np.ndarray | None = None
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    hash_ids: tuple[np.ndarray, ...] | None = None
    hash_block_tokens: int = 0

    def __len__(self) -> int:
        return int(self.prompt.size)


#: The largest prompt or output length read (tokens): no real request is longer.
MAX_TOKENS = 10**8


def _number(value: object, where: str, column: str, what: str, text: bool) -> float:
    """``value`` as a finite float; a string only where ``text`` (a CSV field), never a
    JSON bool."""
    if isinstance(value, bool) or (isinstance(value, str) and not text):
        raise FormatError(f"{where}: {column}: expected {what}, got {value!r}")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FormatError(f"{where}: {column}: expected {what}, got {value!r}") from None
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise FormatError(f"{where}: {column}: expected a finite number, got {value!r}")
    return number


#: The latest timestamp read (seconds; 2286-11-20 as a Unix time): later than any clock a
#: trace is recorded with reads (Unix time, a monotonic clock, ``time.perf_counter``), so
#: a larger one is a wrong unit or an absurd value. The span a simulated stream may have
#: is checked where a trace becomes one
#: (:data:`schedlab.serving.workloads.MAX_WINDOW_S`): lengths alone are read from traces
#: of any span.
MAX_TIMESTAMP_S = 1e10


def time_field(value: object, where: str, column: str, *, unit_s: float = 1.0) -> float:
    """A timestamp or duration in units of ``unit_s``, as seconds: finite, from 0 to
    :data:`MAX_TIMESTAMP_S`; errors name ``where`` and ``column``.

    Raises
    ------
    FormatError
        For a value that is not a number (a JSON string or bool), not finite or out of
        range.
    """
    seconds = _number(value, where, column, "a number", False) * unit_s
    if not 0 <= seconds <= MAX_TIMESTAMP_S:
        raise FormatError(
            f"{where}: {column}: must be from 0 to {MAX_TIMESTAMP_S / unit_s:g} (as seconds, "
            f"a date before 2287), got {value!r}"
        )
    return seconds


def _int_field(value: object, where: str, column: str, minimum: int, *, text: bool = False) -> int:
    """A token count from ``minimum`` to :data:`MAX_TOKENS`, naming the place on failure."""
    number = _number(value, where, column, "an integer", text)
    if number != int(number):
        raise FormatError(f"{where}: {column}: expected an integer, got {value!r}")
    if not minimum <= number <= MAX_TOKENS:
        raise FormatError(
            f"{where}: {column}: must be from {minimum} to {MAX_TOKENS:g}, got {int(number)}"
        )
    return int(number)


def _float_field(value: object, where: str, column: str, *, text: bool = False) -> float:
    return _number(value, where, column, "a number", text)


def _csv_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[str, dict[str, str]]]:
    """Yield ``(place, row)`` for each data row of a CSV file with the required columns."""
    with path.open(newline="", encoding="utf-8-sig") as handle:  # a BOM, as Excel saves it
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        twice = sorted({c for c in header if c and header.count(c) > 1})  # "": a blank column
        if twice:  # csv would keep the last of them
            raise FormatError(f"{path}:1: column(s) {', '.join(twice)} given twice")
        missing = [c for c in required if c not in header]
        if missing:
            raise FormatError(f"{path}:1: missing column(s) {', '.join(missing)}")
        for row in reader:
            place = f"{path}:{reader.line_num}"
            if None in row or any(row[c] is None for c in required):
                raise FormatError(f"{place}: expected {len(header)} fields")
            yield place, row


def jsonl_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[str, dict]]:
    """Yield ``(place, object)`` for each non-blank line of a JSONL file.

    Raises :class:`FormatError` naming ``file:line`` for invalid JSON, a line that is not
    an object, or missing ``required`` keys; refuses a file above the size cap
    (:func:`~schedlab.json_files.check_size`).
    """
    check_size(path, "JSONL file")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            place = f"{path}:{number}"
            row = parse_json(line.rstrip("\r\n"), str(path), number)
            if not isinstance(row, dict):
                raise FormatError(f"{place}: expected a JSON object")
            missing = [c for c in required if c not in row]
            if missing:
                raise FormatError(f"{place}: missing key(s) {', '.join(missing)}")
            yield place, row


def _ints(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _relative(times: list[float]) -> np.ndarray:
    arr = np.asarray(times, dtype=float)
    return arr - arr.min() if arr.size else arr


def _empty_check(path: Path, prompt: list[int]) -> None:
    if not prompt:
        raise FormatError(f"{path}: no requests")


def _arrival(stamps: list[float], seconds: float, place: str, column: str) -> None:
    """Append the arrival ``seconds`` to ``stamps``, refusing it if it is before the
    arrival of the request before (an arrival log lists its requests in time order)."""
    if stamps and seconds < stamps[-1]:
        raise FormatError(
            f"{place}: {column}: {stamps[-1] - seconds:.6g} s before the request on the line "
            f"before; an arrival log lists its requests in time order: sort it by {column}"
        )
    stamps.append(seconds)


_VLLM_TIMES = ("queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts")


def check_request_times(times: dict[str, float], where: str) -> None:
    """Refuse one request's measured timestamps of a vLLM run (``queued_ts``,
    ``scheduled_ts``, ``first_token_ts``, ``last_token_ts``, those present in ``times``)
    unless each is at or after the one before it, naming the pair.

    Raises
    ------
    FormatError
        ``"{where}: timestamps out of order: scheduled_ts 3.2 before queued_ts 4.0"``.
    """
    present = [(key, times[key]) for key in _VLLM_TIMES if key in times]
    for (before, early), (key, late) in pairwise(present):
        if late < early:
            raise FormatError(
                f"{where}: timestamps out of order: {key} {late!r} before {before} {early!r}"
            )


def _read_azure(path: Path) -> Trace:
    prompt: list[int] = []
    output: list[int] = []
    stamps: list[float] = []
    cols = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
    for place, row in _csv_rows(path, cols):
        try:
            stamp = datetime.fromisoformat(row["TIMESTAMP"].strip()[:26]).timestamp()
        except (ValueError, OverflowError, OSError):  # OSError: beyond the platform's clock
            raise FormatError(
                f"{place}: TIMESTAMP: expected a date-time, got {row['TIMESTAMP']!r}"
            ) from None
        _arrival(stamps, time_field(stamp, place, "TIMESTAMP"), place, "TIMESTAMP")
        prompt.append(_int_field(row["ContextTokens"], place, "ContextTokens", 0, text=True))
        output.append(_int_field(row["GeneratedTokens"], place, "GeneratedTokens", 0, text=True))
    _empty_check(path, prompt)
    return Trace(path.stem, _ints(prompt), _ints(output), _relative(stamps))


def _read_length_stats(path: Path) -> Trace:
    prompt: list[int] = []
    output: list[int] = []
    for place, row in _csv_rows(path, ("num_prefill_tokens", "num_decode_tokens")):
        prompt.append(
            _int_field(row["num_prefill_tokens"], place, "num_prefill_tokens", 0, text=True)
        )
        output.append(
            _int_field(row["num_decode_tokens"], place, "num_decode_tokens", 0, text=True)
        )
    _empty_check(path, prompt)
    return Trace(path.stem, _ints(prompt), _ints(output))


#: Tokens per block of a Mooncake trace's ``hash_ids`` (the trace's README and
#: ``FAST25-release/traces``: blocks of 512 tokens).
MOONCAKE_BLOCK_TOKENS = 512

#: The largest block id read from ``hash_ids`` (:math:`2^{63} - 1`, the largest ``int64``
#: the ids are kept in): Mooncake's ids are remapped block numbers from 0 (module
#: docstring), so nothing near it is one.
MAX_HASH_ID = 2**63 - 1


def _hash_ids(
    value: object, place: str, tokens: int, seen: dict[int, tuple[int, int]]
) -> np.ndarray:
    """A row's ``hash_ids``, checked against its ``input_length`` and against the ids of
    earlier rows (``seen``: id -> its block position and the id before it, -1 at 0)."""
    need = -(-tokens // MOONCAKE_BLOCK_TOKENS)
    if not isinstance(value, list) or not value:
        raise FormatError(
            f"{place}: hash_ids: expected a list of {need} block ids, got {value!r:.60}"
        )
    if len(value) != need:
        raise FormatError(
            f"{place}: hash_ids: {len(value)} block ids for input_length {tokens}; blocks "
            f"of {MOONCAKE_BLOCK_TOKENS} tokens need {need}"
        )
    before = -1
    for k, item in enumerate(value):
        json_integer(item, f"{place}: hash_ids[{k}]", 0, MAX_HASH_ID)
        known = seen.setdefault(item, (k, before))
        if known != (k, before):
            raise FormatError(
                f"{place}: hash_ids[{k}]: id {item} was block {known[0]} after id "
                f"{known[1]} on an earlier line; an id names its whole prefix"
            )
        before = item
    return np.asarray(value, np.int64)


def _read_mooncake(path: Path) -> Trace:
    prompt: list[int] = []
    output: list[int] = []
    stamps: list[float] = []
    hashes: list[np.ndarray] = []
    seen: dict[int, tuple[int, int]] = {}
    for place, row in jsonl_rows(path, ("timestamp", "input_length", "output_length")):
        seconds = time_field(row["timestamp"], place, "timestamp", unit_s=1e-3)  # ms
        _arrival(stamps, seconds, place, "timestamp")
        prompt.append(_int_field(row["input_length"], place, "input_length", 0))
        output.append(_int_field(row["output_length"], place, "output_length", 0))
        if "hash_ids" in row or hashes:
            if len(hashes) < len(prompt) - 1:  # earlier lines had none
                raise FormatError(f"{place}: hash_ids on this line but not on the lines before")
            hashes.append(_hash_ids(row.get("hash_ids"), place, prompt[-1], seen))
    _empty_check(path, prompt)
    trace = Trace(path.stem, _ints(prompt), _ints(output), _relative(stamps))
    if hashes:
        return replace(trace, hash_ids=tuple(hashes), hash_block_tokens=MOONCAKE_BLOCK_TOKENS)
    return trace


def _read_vllm_bench(path: Path) -> Trace:
    prompt: list[int] = []
    output: list[int] = []
    stamps: list[float] = []
    measured: dict[str, list[float]] = {k: [] for k in _VLLM_TIMES}
    for place, row in jsonl_rows(path, ("input_toks", "output_toks", "arrival_time")):
        prompt.append(_int_field(row["input_toks"], place, "input_toks", 0))
        output.append(_int_field(row["output_toks"], place, "output_toks", 0))
        stamps.append(time_field(row["arrival_time"], place, "arrival_time"))
        times = {k: time_field(row[k], place, k) for k in _VLLM_TIMES if row.get(k) is not None}
        check_request_times(times, place)
        for key in _VLLM_TIMES:
            measured[key].append(times.get(key, math.nan))
    _empty_check(path, prompt)
    extra = {k: np.array(v) for k, v in measured.items() if not np.isnan(v).all()}
    return Trace(path.stem, _ints(prompt), _ints(output), _relative(stamps), extra)


def _column(data: dict, key: str, n: int, path: Path) -> list:
    values = data[key]
    if not isinstance(values, list) or len(values) != n:
        raise FormatError(f"{path}: {key}: expected a list of {n} entries")
    return values


def _read_vllm_bench_serve(path: Path) -> Trace:
    data = read_json(path, "benchmark result")
    if not isinstance(data, dict):
        raise FormatError(f"{path}: expected a JSON object (vllm bench serve --save-result)")
    missing = [k for k in ("input_lens", "output_lens") if k not in data]
    if missing:
        raise FormatError(f"{path}: missing field(s) {', '.join(missing)}")
    n = len(data["input_lens"]) if isinstance(data["input_lens"], list) else -1
    inputs, outputs = (_column(data, k, n, path) for k in ("input_lens", "output_lens"))
    timed = "start_times" in data  # some vLLM versions save ttfts, itls without it
    detailed = timed and "ttfts" in data and "itls" in data
    errors = _column(data, "errors", n, path) if "errors" in data else [""] * n
    columns = {
        k: _column(data, k, n, path)
        for k in ("start_times", "ttfts", "itls")
        if k in data and (k == "start_times" or detailed)
    }
    prompt: list[int] = []
    output: list[int] = []
    timing: dict[str, list[float]] = {"start": [], "ttft_s": [], "decode_s": []}
    for i in range(n):
        place = f"{path}: request {i}"
        if errors[i] or not outputs[i]:
            continue
        prompt.append(_int_field(inputs[i], place, "input_lens", 1))
        output.append(_int_field(outputs[i], place, "output_lens", 1))
        if timed:
            timing["start"].append(time_field(columns["start_times"][i], place, "start_times"))
        if detailed:
            gaps = columns["itls"][i]
            if not isinstance(gaps, list):
                raise FormatError(f"{place}: itls: expected a list of gaps")
            ttft = _float_field(columns["ttfts"][i], place, "ttfts")
            decode = sum(_float_field(g, place, "itls") for g in gaps)
            if ttft < 0 or decode < 0:
                raise FormatError(f"{place}: ttfts and itls must be >= 0")
            timing["ttft_s"].append(ttft)
            timing["decode_s"].append(decode)
    _empty_check(path, prompt)
    if not timed:  # no send times: lengths only, whatever else was measured
        return Trace(path.stem, _ints(prompt), _ints(output))
    extra = {k: np.array(timing[k]) for k in ("ttft_s", "decode_s")} if detailed else {}
    return Trace(path.stem, _ints(prompt), _ints(output), _relative(timing["start"]), extra)


_READERS: dict[str, Callable[[Path], Trace]] = {
    "azure": _read_azure,
    "length-stats": _read_length_stats,
    "mooncake": _read_mooncake,
    "vllm-bench": _read_vllm_bench,
    "vllm-bench-serve": _read_vllm_bench_serve,
}
TRACE_KINDS: tuple[str, ...] = tuple(_READERS)


def check_lengths(trace: Trace, where: str | Path, *, min_prompt: int = 1) -> Trace:
    """``trace`` if each request has at least ``min_prompt`` prompt tokens and one
    output token; else a :class:`FormatError` naming the first that has not.

    Nothing raises a short length to the minimum silently: that would serve or schedule
    a different workload than the one recorded. A serving engine needs a prompt token
    (vLLM refuses an empty prompt: "decoder prompt cannot be empty",
    ``tests/entrypoints/llm/test_prompt_validation.py``) and emits at least one; the
    offline model allows an empty prompt (``docs/design.md``, "Offline model").
    """
    for what, lengths, least in (
        ("prompt", trace.prompt, min_prompt),
        ("output", trace.output, 1),
    ):
        short = np.flatnonzero(lengths < least)
        if short.size:
            raise FormatError(
                f"{where}: request {short[0]} (in file order) has {what} length "
                f"{lengths[short[0]]}; every request needs at least {least} {what} "
                f"token(s) ({short.size} such)"
            )
    return trace


def check_time_order(trace: Trace, where: str | Path) -> Trace:
    """``trace`` if its requests are listed in time order; else a :class:`FormatError`
    naming the first out of place (a replay never re-sorts a file: the order of equal
    timestamps would be the sort's, not the record's)."""
    if trace.arrival_s is not None:
        early = np.flatnonzero(np.diff(trace.arrival_s) < 0)
        if early.size:
            k = int(early[0]) + 1
            raise FormatError(
                f"{where}: request {k} (in file order) arrives before request {k - 1}; "
                "sort the trace by time"
            )
    return trace


def detect_kind(path: str | Path) -> str:
    """Guess a trace file's kind from its first line (a ``.json`` file: the output of
    ``vllm bench serve``).

    Raises
    ------
    FormatError
        If the first line matches none of :data:`TRACE_KINDS`.
    """
    path = Path(path)
    if path.suffix == ".json":
        return "vllm-bench-serve"
    with path.open(encoding="utf-8-sig") as handle:
        first = handle.readline()
    if first.startswith("TIMESTAMP,ContextTokens"):
        return "azure"
    if first.startswith("num_prefill_tokens"):
        return "length-stats"
    if '"input_toks"' in first:
        return "vllm-bench"
    if '"input_length"' in first:
        return "mooncake"
    raise FormatError(f"{path}:1: not a known trace format ({', '.join(TRACE_KINDS)})")


def read_trace(path: str | Path, kind: str | None = None) -> Trace:
    """Read a trace file of the given kind (detected from its first line if ``None``).

    Raises
    ------
    DataNotFoundError
        If ``path`` does not exist.
    FormatError
        On a malformed file; the message names file and line.
    UnknownNameError
        If ``kind`` is not one of :data:`TRACE_KINDS`.
    """

    path = check_size(path, "trace file")
    try:
        kind = kind or detect_kind(path)
        if kind not in _READERS:
            raise UnknownNameError("trace kind", kind, TRACE_KINDS)
        return _READERS[kind](path)
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:  # e.g. a field beyond the csv module's size limit
        raise FormatError(f"{path}: not a CSV file ({exc})") from None
