r"""Schedules with eviction: each request's runs, their objective, waste and verifier.

In the semi-online model (``docs/design.md``, "Semi-online model") a scheduler may *evict* a
running request: it frees the request's memory and loses its progress, and the request
starts again later from its first token (vLLM's preemption by recompute). A schedule is
then, per request :math:`i`, its runs :math:`(p_{i1}, r_{i1}), \dots, (p_{ik}, r_{ik})`
in order: run :math:`j` starts in round :math:`p_{ij}` and is active :math:`r_{ij}`
rounds, holding :math:`s_i + q` tokens in its :math:`q`-th active round. Every run but
the last was evicted (:math:`1 \le r_{ij} < o_i`); the last completes
(:math:`r_{ik} = o_i`), at :math:`C_i = p_{ik} + o_i`. The objective is the offline one,
the total end-to-end latency :math:`\sum_i (C_i - a_i)`: only last starts count
(:func:`objective`). Evicted runs only waste: :func:`evictions` counts them and
:func:`wasted_token_rounds` the tokens they held, summed over their rounds.

:func:`verify_runs` checks a schedule against its instance independently of the online
engine (:mod:`schedlab.offline.online.engine`): every run as a request of its own, with
the request's prompt and the run's length, goes through the offline verifier
(:mod:`schedlab.offline.verify`), which shares no code with the engine, and the order and
lengths of each request's runs are checked here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from schedlab.errors import InputTypeError, ScheduleError
from schedlab.offline.instance import MAX_PRODUCT, Instance, Request, check_instance
from schedlab.offline.schedule import Schedule, total_latency
from schedlab.offline.verify import verify

__all__ = [
    "Runs",
    "assert_runs_feasible",
    "check_runs",
    "evictions",
    "last_starts",
    "objective",
    "run_schedule",
    "runs_to_lists",
    "verify_runs",
    "wasted_rounds",
    "wasted_token_rounds",
]

#: Per request, its runs ``(start, rounds)`` in order; only the last completes.
Runs = tuple[tuple[tuple[int, int], ...], ...]


def check_runs(runs: Any, where: str, n: int | None = None) -> Runs:
    """``runs`` as :data:`Runs` if it is a sequence, per request, of a non-empty sequence
    of integer ``(start, rounds)`` pairs (``n`` of them when given); the door check of
    this module's functions, which otherwise trust their argument.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) naming ``where`` and the first malformed request.
    ScheduleError
        For another number of entries than ``n``.
    """
    if isinstance(runs, str | bytes) or not isinstance(runs, Sequence):
        raise InputTypeError(
            f"{where}: runs: expected one sequence of runs per request, got "
            f"{type(runs).__name__} {runs!r:.60}"
        )
    checked = []
    for i, entry in enumerate(runs):
        pairs = _pairs(entry)
        if isinstance(pairs, str):
            raise InputTypeError(f"{where}: runs: request {i}: {pairs}")
        checked.append(tuple(pairs))
    if n is not None and len(checked) != n:
        raise ScheduleError(f"{where}: runs: {len(checked)} entries for {n} requests")
    return tuple(checked)


def last_starts(runs: Runs) -> np.ndarray:
    """The start round of each request's last (completing) run.

    Raises
    ------
    InputTypeError
        For malformed runs (:func:`check_runs`).
    """
    runs = check_runs(runs, "last_starts")
    return np.array([request[-1][0] for request in runs], dtype=np.int64)


def objective(instance: Instance, runs: Runs) -> int:
    r"""Total end-to-end latency :math:`\sum_i (p_{ik} + o_i - a_i)` of the last runs.

    Raises
    ------
    InputTypeError, ScheduleError
        For a non-instance, malformed runs or runs of another instance
        (:func:`check_runs`).
    """
    check_instance(instance, "objective: instance")
    return total_latency(instance, last_starts(check_runs(runs, "objective", instance.n)))


def evictions(runs: Runs) -> int:
    """The number of evicted runs: every run but each request's last.

    Raises
    ------
    InputTypeError
        For malformed runs (:func:`check_runs`).
    """
    return sum(len(request) - 1 for request in check_runs(runs, "evictions"))


def wasted_rounds(runs: Runs) -> int:
    """Rounds spent in evicted runs, summed over requests.

    Raises
    ------
    InputTypeError
        For malformed runs (:func:`check_runs`).
    """
    return sum(
        rounds for request in check_runs(runs, "wasted_rounds") for _, rounds in request[:-1]
    )


def wasted_token_rounds(instance: Instance, runs: Runs) -> int:
    r"""Tokens held by evicted runs, summed over their rounds: an evicted run of
    :math:`r` rounds of request :math:`i` held :math:`\sum_{q=1}^{r} (s_i + q) = r s_i +
    r(r+1)/2` token-rounds of KV cache for nothing.

    Raises
    ------
    InputTypeError, ScheduleError
        As :func:`objective`.
    """
    check_instance(instance, "wasted_token_rounds: instance")
    runs = check_runs(runs, "wasted_token_rounds", instance.n)
    return sum(
        rounds * instance.requests[i].prompt + rounds * (rounds + 1) // 2
        for i, request in enumerate(runs)
        for _, rounds in request[:-1]
    )


def run_schedule(instance: Instance, runs: Runs) -> Schedule:
    """Every run, evicted ones included, as a request of its own started at its start: the
    schedule whose load in each round is the memory ``runs`` hold then, so its
    ``peak_memory`` and ``utilisation`` count the evicted runs' tokens too (those of the
    last runs alone, ``Schedule(instance, last_starts(runs))``, do not). ``runs`` must be
    well formed (:func:`verify_runs` finds nothing but memory to report)."""
    pieces = tuple(
        Request(instance.requests[i].prompt, rounds)
        for i, request in enumerate(runs)
        for _, rounds in request
    )
    starts = np.array([start for request in runs for start, _ in request], dtype=np.int64)
    return Schedule(Instance(instance.kv_tokens, pieces), starts)


def runs_to_lists(runs: Runs) -> list[list[list[int]]]:
    """``runs`` as JSON-ready lists: ``[[[start, rounds], ...], ...]``.

    Raises
    ------
    InputTypeError
        For malformed runs (:func:`check_runs`).
    """
    return [[[p, r] for p, r in request] for request in check_runs(runs, "runs_to_lists")]


def _integer(value: Any) -> int | None:
    """``value`` as an ``int`` if it is an integer of at most ``MAX_PRODUCT`` in size."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        return None
    number = int(value)
    return number if abs(number) <= MAX_PRODUCT else None


def _pairs(entry: Any) -> list[tuple[int, int]] | str:
    """A request's runs as integer pairs, or what is wrong with them."""
    if isinstance(entry, str | bytes) or not isinstance(entry, Sequence) or not entry:
        return "expected a non-empty sequence of (start, rounds) runs"
    pairs = []
    for j, run in enumerate(entry):
        if isinstance(run, str | bytes) or not isinstance(run, Sequence) or len(run) != 2:
            return f"run {j}: expected (start, rounds), got {run!r}"
        start, rounds = _integer(run[0]), _integer(run[1])
        if start is None or rounds is None:
            return (
                f"run {j}: start and rounds must be integers of at most 2**62 in size, "
                f"got {tuple(run)!r:.60}"
            )
        pairs.append((start, rounds))
    return pairs


def verify_runs(instance: Instance, runs: Runs | Sequence[Any]) -> list[str]:
    """Every violation of ``runs`` on ``instance``, in words (empty if feasible).

    Checked: one entry of runs per request; each run has integer start and
    ``rounds >= 1``; the first run starts no earlier than the release; each run starts
    after the previous one ends (no overlap, in order); every run but the last is shorter
    than ``o_i`` (it would have completed) and the last has exactly ``o_i`` rounds; and in
    every round the active runs hold at most ``M`` tokens (a run in its ``q``-th round
    holds ``s_i + q``), by the offline verifier on the runs taken as requests.
    """
    check_instance(instance, "verify_runs")
    if isinstance(runs, str | bytes) or not isinstance(runs, Sequence):
        raise ScheduleError(f"runs: expected one sequence of runs per request, got {runs!r}")
    if len(runs) != instance.n:
        return [f"runs: {len(runs)} entries for {instance.n} requests"]
    problems: list[str] = []
    pieces: list[Request] = []
    starts: list[int] = []
    for i, (request, entry) in enumerate(zip(instance.requests, runs, strict=True)):
        pairs = _pairs(entry)
        if isinstance(pairs, str):
            problems.append(f"request {i}: {pairs}")
            continue
        if pairs[0][0] < request.arrival:
            problems.append(
                f"request {i}: run 0 starts in round {pairs[0][0]}, before its release "
                f"round {request.arrival}"
            )
        for j, (start, rounds) in enumerate(pairs):
            last = j == len(pairs) - 1
            if rounds < 1:
                problems.append(f"request {i}: run {j} has {rounds} rounds (at least 1)")
                continue
            if last and rounds != request.output:
                problems.append(
                    f"request {i}: its last run has {rounds} rounds, not its output length "
                    f"{request.output}: it does not complete"
                )
            if not last and rounds >= request.output:
                problems.append(
                    f"request {i}: run {j} has {rounds} rounds, so it completed; only the "
                    f"last run may (output length {request.output})"
                )
            if j and start < pairs[j - 1][0] + pairs[j - 1][1]:
                before = pairs[j - 1]
                problems.append(
                    f"request {i}: run {j} starts in round {start}, before run {j - 1} "
                    f"(rounds {before[0]}..{before[0] + before[1] - 1}) ends"
                )
            if rounds <= request.output:
                pieces.append(Request(request.prompt, rounds))
                starts.append(start)
    if pieces:
        pieced = Instance(instance.kv_tokens, tuple(pieces))
        problems.extend(p for p in verify(pieced, np.array(starts)) if p.startswith("memory"))
    return problems


def assert_runs_feasible(instance: Instance, runs: Runs | Sequence[Any]) -> None:
    """Raise :class:`~schedlab.errors.ScheduleError` listing every violation, if any."""
    problems = verify_runs(instance, runs)
    if problems:
        raise ScheduleError("infeasible runs: " + "; ".join(problems))
