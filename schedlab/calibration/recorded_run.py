r"""A recorded serving run: its requests, what was measured, and how it was configured.

Two formats are read (:func:`read_recorded_run` tells them apart):

* **LLMServingSim's bench directory** (casys-kaist/LLMServingSim ``bench/``, as in
  ``../shared/data/validation/``): ``requests.jsonl`` with, per request, ``input_toks``,
  ``output_toks`` and the engine's timestamps ``queued_ts``, ``first_token_ts``,
  ``last_token_ts`` (monotonic seconds); beside it ``meta.json`` (engine arguments, vLLM
  version, and when recorded the ``kv_cache`` vLLM allocated), ``config.json`` (GPUs,
  their memory, the link between them) and ``timeseries.csv`` (per second: prompt and
  generation tokens per second, running and waiting requests, KV-cache use).
* **vLLM's benchmark output** (``vllm bench serve --save-result --save-detailed``; field
  names from ``vllm/benchmarks/serve.py``, lines 993–999): per-request ``input_lens``,
  ``output_lens``, ``ttfts`` (seconds), ``itls`` (the inter-token gaps of each request, in
  seconds) and ``start_times`` (when each request was sent, ``time.perf_counter``).
  Without ``start_times`` (a run saved without ``--save-detailed``) the arrivals are not
  known and the file is refused.

Definitions, for a request with ``o`` output tokens, sent or queued at ``q``:

* TTFT :math:`=` first token :math:`- q`; latency :math:`=` last token :math:`- q`;
* TPOT :math:`= (\text{last} - \text{first}) / (o - 1)`, over requests with :math:`o > 1`.

Arrivals are aligned to the earliest ``q`` (only differences of monotonic timestamps are
meaningful). The two formats measure from different places: the bench directory's
timestamps are the engine's (``queued_ts`` is when the engine took the request in), a
benchmark's are the client's (``start_times`` is when it sent the request, and its TTFT
includes the front end and the wait for the running iteration); :attr:`RecordedRun.clock`
says which, and :mod:`schedlab.calibration.replay` measures the simulation alike.

A token count above :data:`~schedlab.llm.traces.MAX_TOKENS`, a negative timestamp, or a
run spanning more than :data:`MAX_SPAN_S` seconds is refused: none is a real request or
run (the last is what mixing epoch and monotonic clocks gives). Requests listed out of
arrival order (neither format promises the order) are read sorted, with a
:class:`~schedlab.errors.SchedlabNote` (one line on the command line's stderr).
"""

from __future__ import annotations

import csv
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.calibration.profiles import number_field
from schedlab.errors import DataNotFoundError, FormatError, SchedlabNote
from schedlab.json_files import check_size, read_json
from schedlab.llm.traces import (
    MAX_TOKENS,
    check_request_times,
    jsonl_rows,
    read_trace,
    time_field,
)
from schedlab.serving.workloads import MAX_WINDOW_S, RequestStream

__all__ = [
    "MeasuredSeries",
    "RecordedRun",
    "read_recorded_run",
    "read_vllm_bench_result",
    "run_files",
]

#: The longest span of arrivals and tokens read (seconds): the longest window a simulated
#: stream takes (:data:`~schedlab.serving.workloads.MAX_WINDOW_S`, 11.6 days).
MAX_SPAN_S = MAX_WINDOW_S

_FIELDS = ("input_toks", "output_toks", "queued_ts", "first_token_ts", "last_token_ts")

#: The token counts among them: integers from 1 to :data:`MAX_TOKENS`.
_COUNTS = _FIELDS[:2]

#: Timestamps of a request that the run does not need but a file may give: the client's
#: ``arrival_time`` (epoch seconds) and when the engine first ``scheduled_ts`` it.
_OPTIONAL_TIMES = ("arrival_time", "scheduled_ts")
_SERIES = ("t", "prompt_throughput", "gen_throughput", "running", "waiting")


@dataclass(frozen=True)
class MeasuredSeries:
    """A run's per-second time series (``timeseries.csv``): bucket ends ``t`` (seconds),
    prompt and generation tokens per second, running and waiting requests, and KV-cache
    use (percent; ``nan`` where not recorded)."""

    t: np.ndarray
    prompt_tps: np.ndarray
    generation_tps: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    kv_percent: np.ndarray


@dataclass(frozen=True)
class RecordedRun:
    """A recorded serving run, requests sorted by arrival.

    Attributes
    ----------
    path
        The file read (``requests.jsonl`` or the benchmark JSON).
    arrival_s
        Queued (or sent) times minus the earliest one.
    prompt, output
        Token counts.
    ttft_s, tpot_s, latency_s
        Measured metrics (``tpot_s`` is ``nan`` for one-token outputs).
    meta, config
        ``meta.json`` and ``config.json`` of the run's directory (empty if absent).
    series
        ``timeseries.csv``, if present.
    clock
        Where the timestamps were taken: ``"engine"`` (the bench directory: from when the
        engine queued the request) or ``"client"`` (a benchmark: from when it was sent).
    """

    path: Path
    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    latency_s: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    series: MeasuredSeries | None = None
    clock: str = "engine"

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    @property
    def directory(self) -> Path:
        return self.path.parent

    def stream(self) -> RequestStream:
        """The requests as a simulator stream; its window is the measured run's span
        (first arrival to last token), which only goodput figures would use."""
        return RequestStream(
            self.path.name,
            self.arrival_s,
            self.prompt,
            self.output,
            float(np.max(self.arrival_s + self.latency_s)),
        )


def _read_object(path: Path) -> dict[str, Any]:
    """The object in ``path``, or ``{}`` where the run has no such file."""
    if not path.is_file():
        return {}
    data = read_json(path)
    if not isinstance(data, dict):
        raise FormatError(f"{path}: expected a JSON object")
    return data


def _read_series(path: Path) -> MeasuredSeries | None:
    if not path.is_file():
        return None
    check_size(path, "time series")
    try:
        return _series_rows(path)
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text") from None


def _series_rows(path: Path) -> MeasuredSeries | None:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in _SERIES if c not in (reader.fieldnames or [])]
        if missing:
            raise FormatError(f"{path}:1: missing column(s) {', '.join(missing)}")
        rows = []
        for row in reader:
            where = f"{path}:{reader.line_num}"
            values = [number_field(row[c] or "", c, where) for c in _SERIES]
            kv = row.get("kv_cache_pct")
            rows.append((*values, number_field(kv, "kv_cache_pct", where) if kv else math.nan))
    if not rows:
        return None
    data = np.array(rows)
    return MeasuredSeries(*(data[:, j].copy() for j in range(6)))


def _run(
    path: Path, records: list[tuple[float, float, float, float, float]], clock: str = "engine"
) -> RecordedRun:
    """A run from ``(queued, prompt, output, first, last)`` rows."""
    if not records:
        raise FormatError(f"{path}: no requests")
    data = np.array(records)
    span = float(data[:, 4].max() - data[:, 0].min())
    if not span <= MAX_SPAN_S:
        raise FormatError(
            f"{path}: the timestamps span {span:,.0f} s, more than {MAX_SPAN_S:,.0f} s: are two "
            "clocks mixed (epoch and monotonic seconds)?"
        )
    order = np.argsort(data[:, 0], kind="stable")
    early = np.flatnonzero(np.diff(data[:, 0]) < 0)
    if early.size:  # neither format promises arrival order: sorted, and said so
        warnings.warn(
            f"{path}: request {early[0] + 1} (in file order) arrived before request "
            f"{early[0]}; {early.size} such, the requests are read sorted by arrival",
            SchedlabNote,
            stacklevel=3,
        )
    data = data[order]
    queued, prompt, output, first, last = data.T
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(output > 1, (last - first) / (output - 1), np.nan)
    return RecordedRun(
        path,
        queued - queued[0],
        prompt.astype(np.int64),
        output.astype(np.int64),
        first - queued,
        tpot,
        last - queued,
        _read_object(path.parent / BESIDE_REQUESTS[0]),
        _read_object(path.parent / BESIDE_REQUESTS[1]),
        _read_series(path.parent / BESIDE_REQUESTS[2]),
        clock,
    )


def read_recorded_run(path: str | Path) -> RecordedRun:
    """Read a recorded run: a run directory, its ``requests.jsonl``, or a vLLM benchmark
    result (``.json``; :func:`read_vllm_bench_result`).

    Raises
    ------
    DataNotFoundError
        If nothing is there.
    FormatError
        On a malformed line (named ``path:line``): invalid JSON, a missing field, a
        non-integer or non-positive token count, a timestamp (``arrival_time`` and
        ``scheduled_ts`` included, where given) that is not a finite number from 0 to
        :data:`~schedlab.llm.traces.MAX_TIMESTAMP_S`, or a request's timestamps out of
        order (``queued_ts <= scheduled_ts <= first_token_ts <= last_token_ts``, naming
        the pair).
    """
    path = Path(path)
    if path.is_dir():
        if not (path / "requests.jsonl").is_file():
            below = sorted(str(p.parent) for p in path.glob("*/requests.jsonl"))
            more = f" and {len(below) - 5} more" if len(below) > 5 else ""
            hint = f"; runs below it: {', '.join(below[:5])}{more}" if below else ""
            raise DataNotFoundError(f"{path}: no requests.jsonl in this run directory{hint}")
        path = path / "requests.jsonl"
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such run directory or requests file")
    if path.suffix == ".json":
        return read_vllm_bench_result(path)
    try:
        rows = list(jsonl_rows(path, _FIELDS))
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text") from None
    return _run(path, [_request(item, where) for where, item in rows])


def _request(item: dict[str, Any], where: str) -> tuple[float, float, float, float, float]:
    """``(queued, prompt, output, first, last)`` of one line of ``requests.jsonl``, its
    values checked (:func:`read_recorded_run`); ``arrival_time`` and ``scheduled_ts``,
    which the run does not need, are checked where present."""
    values = []
    for name in _FIELDS:
        value = item.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FormatError(f"{where}: {name}: expected a number, got {value!r}")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise FormatError(f"{where}: {name}: must be finite")
        if number < 0 and name not in _COUNTS:  # counts: checked below, from 1
            raise FormatError(f"{where}: {name}: must be >= 0, got {value!r}")
        values.append(number)
    prompt, output, queued, first, last = values
    for name, count in zip(_COUNTS, (prompt, output), strict=True):
        if count != int(count) or not 1 <= count <= MAX_TOKENS:
            raise FormatError(
                f"{where}: {name}: expected an integer from 1 to {MAX_TOKENS:g}, got {count:g}"
            )
    times = {"queued_ts": queued, "first_token_ts": first, "last_token_ts": last}
    for name in _OPTIONAL_TIMES:  # on their own clocks; in range where given
        if item.get(name) is not None:
            times[name] = time_field(item[name], where, name)
    check_request_times(times, where)
    return queued, prompt, output, first, last


#: The files of a run beside its requests file, each read if present.
BESIDE_REQUESTS = ("meta.json", "config.json", "timeseries.csv")


def run_files(path: Path) -> list[Path]:
    """The files :func:`read_recorded_run` reads for ``path`` (a run folder, its
    ``requests.jsonl``, or a ``vllm bench`` result ``.json``), whether they exist or not."""
    requests = path / "requests.jsonl" if path.is_dir() else path
    if requests.suffix == ".json":
        return [requests]
    return [requests, *(requests.parent / name for name in BESIDE_REQUESTS)]


def read_vllm_bench_result(path: str | Path) -> RecordedRun:
    """A measured run from ``vllm bench serve --save-result --save-detailed`` output
    (the ``vllm-bench-serve`` trace of :mod:`schedlab.llm.traces`).

    Each request ``i`` was sent at ``start_times[i]``; its first token came ``ttfts[i]``
    later and its other tokens after the gaps ``itls[i]``, so its latency is
    ``ttfts[i] + sum(itls[i])`` (as vLLM's own report computes it, ``serve.py`` line 1881).
    Failed requests are left out.

    Raises
    ------
    FormatError
        Naming the field, if one is malformed — or if any of ``start_times``, ``ttfts``
        and ``itls`` is missing (only ``--save-detailed`` records them, and some vLLM
        versions leave out ``start_times``).
    """
    path = Path(path)
    trace = read_trace(path, "vllm-bench-serve")
    if trace.arrival_s is None or "ttft_s" not in trace.extra:
        data = read_json(path, "benchmark result")  # an object: read_trace checked it
        missing = [k for k in ("start_times", "ttfts", "itls") if k not in data]
        raise FormatError(
            f"{path}: missing field(s) {', '.join(missing)} (only --save-detailed saves "
            "start_times, ttfts and itls, and some vLLM versions not start_times)"
        )
    first = trace.arrival_s + trace.extra["ttft_s"]
    records = [
        (float(a), float(p), float(o), float(f), float(f + d))
        for a, p, o, f, d in zip(
            trace.arrival_s,
            trace.prompt,
            trace.output,
            first,
            trace.extra["decode_s"],
            strict=True,
        )
    ]
    return _run(path, records, "client")
