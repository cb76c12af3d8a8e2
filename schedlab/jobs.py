"""Grids of independent jobs, run by one of three executors, resumable from a results file.

A :class:`Job` is plain data: a ``kind`` and JSON-ready ``params`` (a seed travels in
them), so the same job gives the same answer wherever it runs. A *runner* — a
module-level function ``runner(job) -> JSON-ready value``, so that every executor can ship
it by reference — says what each kind does; :mod:`schedlab.serving.capacity` (simulations,
capacity searches) and :mod:`schedlab.offline.compare` (bounds, solver runs) keep theirs,
so this module knows nothing of either. A worker imports the runner's module afresh under
``ray`` (and under the ``spawn`` start method), so solvers, policies or workloads
registered at run time in the caller exist there only if that module registers them.

:func:`run_jobs` runs a grid on an :class:`Executor`: a backend chosen by name
(:data:`BACKENDS`; default :data:`DEFAULT_BACKEND`, ``local``), its workers, a Ray
address, a results file and a progress bar. Every function that runs a grid
(:func:`schedlab.offline.compare.compare`, :func:`~schedlab.offline.report.run_report`,
:func:`schedlab.serving.capacity.sweep`, :func:`~schedlab.serving.capacity.capacity_grid`)
takes one ``executor``; the backends are

``serial``
    In this process, one job after another.
``local``
    A process pool on this machine (all cores by default): PyJobShop and PyVRP run their
    benchmark suites the same way.
``ray``
    An existing Ray cluster (``address="auto"`` or ``"HOST:PORT"``; without an address, a
    local instance), for grids beyond one machine. Ray is an optional extra
    (the ``ray`` extra, ``pip install -e '.[ray]'``), imported only here and only when asked for.

Every job's outcome (its value, or its error) is the same whatever the executor and the
number of workers: outcomes come back in job order. Guarantees beyond the pure map:

* **Failures are recorded, not fatal**: a job that raises gets an :class:`Outcome` with
  the error's type and message, and the others run on. A job whose worker process dies
  (a crash, the out-of-memory killer) is run again, alone, up to :data:`ATTEMPTS` times
  (Ray retries it once with ``max_retries``). ``local`` runs every job in a
  worker process, even with one worker, so that no job can take the caller down.
* **Resumable**: with ``results=FILE.jsonl``, each outcome is appended to the file as it
  arrives (one JSON object a line: key, kind, params, value or error, seconds), and a
  job whose key already has a value there is not run again — rerunning an interrupted
  command completes it without redoing anything finished. A failed job is run again.
* **No orphans**: on Ctrl-C (or SIGTERM through the command line) the pool's workers are
  terminated and Ray's tasks cancelled before the interrupt goes on; a local worker whose
  parent died anyway exits by itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.errors import (
    DataNotFoundError,
    FormatError,
    InputError,
    InputTypeError,
    SchedlabError,
)
from schedlab.json_files import nan_to_null, parse_json, plain, read_bytes
from schedlab.progress import Progress, progress_for

__all__ = [
    "ATTEMPTS",
    "BACKENDS",
    "DEFAULT_BACKEND",
    "Executor",
    "Job",
    "Outcome",
    "ResultsFile",
    "Runner",
    "executor_of",
    "run_jobs",
]

#: Executors by name.
BACKENDS: tuple[str, ...] = ("serial", "local", "ray")

#: The backend of an :class:`Executor` not told otherwise, offline and in serving alike
#: (:class:`Executor` says why).
DEFAULT_BACKEND = "local"

#: Times a job is run alone after a worker died under it, before it is given up (a job
#: that raises is not retried: it would raise again).
ATTEMPTS = 2

#: ``runner(job) -> value``: a module-level function, JSON-ready values.
Runner = Callable[["Job"], Any]

#: What an executor yields: ``(index of the job in its list, outcome)``, as jobs finish.
_Stream = Generator[tuple[int, "Outcome"], None, None]


@dataclass(frozen=True)
class Job:
    """One independent unit of work: what to do (``kind``) and with what (``params``,
    JSON-ready: numbers, strings, lists, objects)."""

    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A digest of ``kind`` and ``params``: equal jobs have equal keys, in any run."""
        text = json.dumps(
            [self.kind, self.params], sort_keys=True, separators=(",", ":"), default=plain
        )
        return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Outcome:
    """What one job gave: its ``value``, or ``error`` (``"Type: message"``).

    ``seconds`` is the wall time of its last attempt (``0`` when read back from a results
    file); ``resumed`` says it was read back instead of run, and ``source`` where from
    (``FILE:LINE``): a value read back is only as true as the file, so the runner's
    caller checks it (:mod:`schedlab.offline.compare`, :mod:`schedlab.serving.capacity`)
    and names that line when it refuses it.
    """

    job: Job
    value: Any = None
    error: str | None = None
    seconds: float = 0.0
    resumed: bool = False
    source: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> str:
        """The results file's line for this outcome."""
        data = {
            "key": self.job.key,
            "kind": self.job.kind,
            "params": self.job.params,
            "value": self.value,
            "error": self.error,
            "seconds": self.seconds,
        }
        return json.dumps(nan_to_null(data), separators=(",", ":"), default=plain)


@dataclass(frozen=True)
class Executor:
    """Where and how a grid of jobs runs; checked when made.

    Attributes
    ----------
    backend
        ``"serial"``, ``"local"`` or ``"ray"`` (module docs). The default, ``local``, is
        the one of both halves of schedlab (the offline comparisons and the serving
        sweeps) and of the command line: the jobs are independent and deterministic, so
        a process pool gives the same outcomes as ``serial`` while using every core, and
        it runs each job in a worker process, so a job the out-of-memory killer ends (a
        large ``dp`` or ``cpsat`` run, a long simulation) is recorded as failed instead
        of ending the caller. ``serial`` runs in this process: for debugging, or where a
        pool's start (tens of milliseconds) outweighs the work.
    workers
        Processes of ``local`` (``None``: all cores); not with ``serial``, which runs one
        job at a time, and left to the cluster under ``ray``.
    address
        The Ray cluster of ``ray`` (``"auto"``, ``"HOST:PORT"``; ``None``: a local
        instance); only with ``ray``.
    results
        A JSONL file: finished jobs found there are not run again, and every outcome is
        appended as it arrives.
    progress
        A bar on standard error with jobs done of the total, elapsed and estimated
        remaining time (:mod:`schedlab.progress`), or the caller's to step.

    Raises
    ------
    InputError, InputTypeError
        Naming the field (``workers: must be an integer >= 1, got 0``); the command line
        names its option instead (``--workers: ...``).
    """

    backend: str = DEFAULT_BACKEND
    workers: int | None = None
    address: str | None = None
    results: str | Path | None = None
    progress: bool | Progress = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise InputError(
                f"backend: expected one of {', '.join(BACKENDS)}, got {self.backend!r}"
            )
        workers = self.workers
        if workers is not None and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
        ):
            raise InputError(f"workers: must be an integer >= 1, got {workers!r}")
        if workers is not None and self.backend == "serial":
            raise InputError("workers: not with backend serial (it runs one job at a time)")
        if self.address is not None:
            if not isinstance(self.address, str):
                raise InputTypeError(f"address: expected a string, got {self.address!r}")
            if self.backend != "ray":
                raise InputError("address: only with backend ray")
        if self.results is not None and not isinstance(self.results, str | Path):
            raise InputTypeError(f"results: expected a file path, got {self.results!r}")
        if not isinstance(self.progress, bool | Progress):
            raise InputTypeError(
                f"progress: expected true, false or a Progress, got {self.progress!r}"
            )


def executor_of(where: str, executor: Executor | None) -> Executor:
    """``executor``, or the default :class:`Executor` for ``None``.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for anything else, naming ``where``.
    """
    if executor is None:
        return Executor()
    if not isinstance(executor, Executor):
        raise InputTypeError(
            f"{where}: executor: expected an Executor, got {type(executor).__name__}"
        )
    return executor


class ResultsFile:
    """The JSONL file outcomes stream to (:meth:`append`), and the finished jobs it holds
    (:meth:`done`), so that a rerun skips them."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise FormatError(f"{self.path}: is a directory (results file expected)")
        if not self.path.parent.is_dir():
            raise DataNotFoundError(f"{self.path}: no folder {self.path.parent} to write it in")
        #: The line each value of :meth:`done` was read from, by key.
        self.lines: dict[str, int] = {}

    def done(self) -> dict[str, Any]:
        """Values of the jobs finished without error, by key (the line each was read
        from in :attr:`lines`).

        Every complete line must be a results line, or the file is refused untouched
        (it is not a results file). A last line cut short (the run was killed while
        writing it) is then removed from the file, so that the next line is not glued
        to it: that job runs again.
        """
        if not self.path.is_file():
            return {}
        data = read_bytes(self.path, "results file")
        complete = data[: data.rfind(b"\n") + 1]
        try:
            lines = complete.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise FormatError(f"{self.path}: not UTF-8 text") from None
        values: dict[str, Any] = {}
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            row = parse_json(line, str(self.path), number)
            key = row.get("key") if isinstance(row, dict) else None
            if not isinstance(key, str) or "value" not in row or "error" not in row:
                raise FormatError(f"{self.path}:{number}: not a line of a results file")
            if row["error"] is None:
                values[key] = row["value"]
                self.lines[key] = number
        if len(complete) < len(data):
            if not values and not lines:  # no results line at all: not ours to cut
                raise FormatError(f"{self.path}: not a results file (one unfinished line)")
            with self.path.open("r+b") as handle:
                handle.truncate(len(complete))
        return values

    def append(self, outcome: Outcome) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(outcome.line() + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def _line_of(store: ResultsFile | None, job: Job) -> str:
    """``FILE:LINE`` of the line ``job``'s value was read from."""
    return "" if store is None else f"{store.path}:{store.lines[job.key]}"


def _attempt(runner: Runner, job: Job) -> Outcome:
    """Run ``job``; an exception becomes the outcome's error."""
    began = time.perf_counter()
    try:
        value = runner(job)
    except Exception as exc:  # recorded with the job; the grid goes on
        return Outcome(job, error=_describe(exc), seconds=time.perf_counter() - began)
    return Outcome(job, value=value, seconds=time.perf_counter() - began)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _serial(runner: Runner, jobs: Sequence[Job], workers: int) -> _Stream:
    del workers
    for index, job in enumerate(jobs):
        yield index, _attempt(runner, job)


def _worker_start(every_s: float = 0.5) -> None:
    """Run in each local worker as it starts: leave Ctrl-C to the parent (which
    terminates the workers), let SIGTERM end the worker at once, and end it once its
    parent is gone (the caller under ``fork`` and ``spawn``, the fork server, which ends
    with the caller, under ``forkserver``), instead of computing on for nobody."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _new_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, initializer=_worker_start)


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now: cancel what has not started and end its workers (Python 3.11's
    executor has no public way to end a running call; ``_processes`` is its own table)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    pool.shutdown(wait=True)


def _local(runner: Runner, jobs: Sequence[Job], workers: int) -> _Stream:
    """A process pool of ``workers``.

    When a worker dies the pool breaks, and every job it had not finished comes back
    unrun, with no word of which one killed it. Those jobs are then run again one at a
    time, each in a process of its own, where a death is the job's own: an innocent job
    simply finishes, and a job whose process dies alone :data:`ATTEMPTS` times is given
    up as ``WorkerDied``.
    """
    broken = yield from _pooled(runner, jobs, range(len(jobs)), workers)
    for index in broken:
        for _ in range(ATTEMPTS):
            if not (yield from _pooled(runner, jobs, [index], 1)):
                break
        else:
            why = f"WorkerDied: the process running it alone died {ATTEMPTS} times"
            yield index, Outcome(jobs[index], error=why)


def _pooled(
    runner: Runner, jobs: Sequence[Job], chosen: Sequence[int], workers: int
) -> Generator[tuple[int, Outcome], None, list[int]]:
    """Run ``jobs[i]`` for ``i`` in ``chosen`` on a fresh pool; yields outcomes as they
    come and returns the jobs left unrun when the pool broke, in job order."""
    pool = _new_pool(min(workers, len(chosen)))
    broken: list[int] = []
    try:
        index_of = {pool.submit(_attempt, runner, jobs[i]): i for i in chosen}
        pending = set(index_of)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    broken.append(index_of[future])
                    continue
                yield index_of[future], outcome
    except BaseException:
        _terminate(pool)
        raise
    pool.shutdown(wait=True)
    return sorted(broken)


#: Seconds to wait for a Ray head's port to accept a connection before ``ray.init``.
CONNECT_TIMEOUT_S = 10.0


def _check_reachable(address: str) -> None:
    """Refuse a ``HOST:PORT`` (or ``ray://HOST:PORT``) address that does not accept a TCP
    connection within :data:`CONNECT_TIMEOUT_S`.

    ``ray.init`` itself retries an unreachable head for minutes (Ray 2.60, address
    ``127.0.0.1:1``: still waiting when killed after 150 s); ``"auto"`` and ``"local"``
    are left to Ray (the cluster started on this machine; a new local instance).
    """
    if address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--address {address}: expected 'auto', 'local' or HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise SchedlabError(f"--address {address}: cannot connect ({_describe(exc)})") from None


def _ray(runner: Runner, jobs: Sequence[Job], workers: int, address: str | None) -> _Stream:
    """Tasks on a Ray cluster, each retried once by Ray if its worker dies."""
    if address is not None:
        _check_reachable(address)
    try:
        import ray
    except ImportError:
        raise SchedlabError(
            "backend ray: Ray is not installed; install the ray extra (in a checkout: "
            "pip install -e '.[ray]')"
        ) from None
    if not ray.is_initialized():
        # ray.init puts its own SIGTERM handler in place (it logs and exits at once);
        # the caller's (the command line's: a clean interrupt, exit 130) is kept
        keep = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGTERM) if keep else None
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,  # stderr is for progress and errors
            )
        except (ValueError, ConnectionError) as exc:  # a malformed or unreachable address
            raise SchedlabError(f"--address {address}: {_describe(exc)}") from None
        if keep:
            signal.signal(signal.SIGTERM, previous)
    remote = ray.remote(max_retries=ATTEMPTS - 1, retry_exceptions=False)(_attempt)
    del workers  # the cluster's size decides
    refs = {remote.remote(runner, job): index for index, job in enumerate(jobs)}
    pending = list(refs)
    try:
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            for ref in finished:
                index = refs[ref]
                try:
                    yield index, ray.get(ref)
                except ray.exceptions.RayError as exc:  # the worker died twice
                    yield index, Outcome(jobs[index], error=f"WorkerDied: {_describe(exc)}")
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise


def run_jobs(
    runner: Runner,
    jobs: Iterable[Job],
    executor: Executor | None = None,
    *,
    desc: str = "jobs",
) -> list[Outcome]:
    """Run every job with ``runner`` on ``executor`` (default: :class:`Executor`'s); the
    outcomes, in job order.

    Parameters
    ----------
    runner
        A module-level function ``runner(job) -> JSON-ready value``.
    jobs
        The grid.
    executor
        Where they run, the results file and the progress bar (:class:`Executor`).
    desc
        The progress bar's label.

    Raises
    ------
    SchedlabError
        For a bad executor, or Ray missing.
    """
    executor = executor_of("run_jobs", executor)
    backend, results = executor.backend, executor.results
    jobs = list(jobs)
    workers = (os.cpu_count() or 1) if executor.workers is None else executor.workers
    store = None if results is None else ResultsFile(results)
    done = {} if store is None else store.done()
    outcomes: list[Outcome | None] = [
        Outcome(job, value=done[job.key], resumed=True, source=_line_of(store, job))
        if job.key in done
        else None
        for job in jobs
    ]
    todo = [i for i, o in enumerate(outcomes) if o is None]
    chosen = [jobs[i] for i in todo]
    with progress_for(executor.progress, desc, len(jobs)) as bar:
        bar(len(jobs) - len(todo), len(jobs))
        if backend == "serial" or not todo:
            stream = _serial(runner, chosen, workers)
        elif backend == "local":
            stream = _local(runner, chosen, workers)
        else:
            stream = _ray(runner, chosen, workers, executor.address)
        try:
            for k, outcome in stream:
                outcomes[todo[k]] = outcome
                if store is not None:
                    store.append(outcome)
                bar.step()
        finally:
            stream.close()  # an interrupt here ends the workers now, not at collection
    return [o for o in outcomes if o is not None]
