"""Local search over priority orders decoded by list scheduling (Wang, Ye, Zhou).

A solution is a priority order; its value is the total latency of the schedule the
strict list-scheduling engine makes of it. Moves:

* ``swap(i, j)``: exchange the requests at positions ``i`` and ``j``;
* ``insert(i, j)``: take the request at position ``i`` out and put it at position ``j``.

Both pick ``i`` uniformly and ``j`` within ``width`` positions of ``i`` (seeded
``numpy.random.Generator``). ``first`` improvement accepts the first improving move;
``best`` samples ``neighbours`` moves and accepts the best improving one; ``late``
is late-acceptance hill climbing (Burke and Bykov, "The late acceptance hill-climbing
heuristic", European Journal of Operational Research 258(1), 2017): move ``k`` is
accepted when its objective is at most the current one or at most the one current
``history`` moves earlier (the ``k mod history`` entry of a list, overwritten by the
current objective after every move), so it may walk through worse orders; the best
order seen is returned. The ``local-search`` solver starts from the best of the
list-scheduling rules (and Sorted-F's batch order), stops after ``work`` moves (its
work budget, :data:`DEFAULT_MOVES` by default), after ``idle`` moves without a new best
(none by default; below) or when the wall-clock cap binds, and returns the best of the
strict and backfilling decodes of the best order (the backfilling one left out once the
cap has passed), its strict decode compacted by
:func:`~schedlab.offline.solvers.left_shift.left_shift`, and the ``mc-sf-backfill``
schedule (so it is never worse than the best
rule). The settings of a search travel together as one :class:`SearchSettings`.

Defaults
--------
``late`` acceptance with ``width = 5`` (the defaults of :class:`SearchSettings` and of
the solver) replaced ``first`` improvement with ``width = 20`` when it ended lower on most
runs of ``python benchmarks/offline_targets.py --rows search`` (``docs/design.md``,
"Decision record"). First improvement is stuck once every nearby move is worse; late
acceptance keeps walking through equal and slightly worse orders, and moves of at most 5
positions are cheap to screen. A long run wants a longer ``history``; the long runs of
the benchmark's ``LONG_SEARCH`` use 1,000 at n = 1,000 and 300 at n = 10,000.

Idle moves
----------
Local search has no natural end. Besides the work budget, ``idle`` ends a search once
that many moves have been made since the best objective last fell: a count of moves, so
the end is as reproducible as a work budget. The search with ``idle`` is the search with
a work budget of the moves it made, move for move (the same draws and acceptances).
Ending on idle moves rather than on a count lets one setting serve sizes whose searches
settle after very different counts: late acceptance with ``local-search``'s settings but
exact moves, from ``lp-search``'s repaired order, last lowered the best at move 45,934 of
the first 65,934 on the shipped mixed n = 200 and at 417,470 of the first 437,470 on the
shipped n = 1,000 (``lp-search``'s default ``idle``,
:data:`~schedlab.offline.solvers.lp_guided.DEFAULT_IDLE` = 20,000). A run stopped this
way reports ``stopped_by`` ``None``; ``stats["improved"]`` gives the moves made when the
best last fell.

Incremental evaluation
----------------------
On a backlog a move is evaluated incrementally by
:class:`~schedlab.offline.solvers.order_evaluator.OrderEvaluator` (its module states how,
and what ``screen`` cuts); with releases, by a full
:func:`~schedlab.offline.decoder.list_schedule` call.

Engines
-------
On a backlog the ``late`` search runs by default in one compiled kernel
(:mod:`~schedlab.offline.solvers.compiled_search`: draw, evaluate, accept, in batches
between which the wall-clock cap is checked); ``engine="python"`` runs the reference
loop of :func:`improve_order`, calling the kernels move by move. Both make the same
moves from the same seed, so every seeded result is the same with either
(``tests/offline/solvers/test_local_search.py``). What the compiled loop saves is the
Python work around a move, so it pays most where moves are cheap
(``python benchmarks/local_search_speed.py --engines`` measures both).
"""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from schedlab.budget import UNLIMITED, Budget, stopped_by
from schedlab.errors import InputError, InputTypeError
from schedlab.offline.decoder import list_schedule, order_array
from schedlab.offline.instance import Instance
from schedlab.offline.priority import RULES, priority_order, rule_schedule
from schedlab.offline.result import SolverOutput
from schedlab.offline.schedule import total_latency
from schedlab.offline.solvers.left_shift import decode_compacted
from schedlab.offline.solvers.order_evaluator import Move, OrderEvaluator, checkpoint_spacing
from schedlab.offline.solvers.sorted_f import batch_order, sorted_f_batches

__all__ = [
    "DEFAULT_MOVES",
    "ENGINES",
    "MAX_HISTORY",
    "MAX_IDLE",
    "MAX_WIDTH",
    "SEARCH_REQUEST_BYTES",
    "STRATEGIES",
    "SearchSettings",
    "best_start_order",
    "improve_order",
    "random_move",
    "require_search_memory",
]

#: Bytes a search over orders keeps a request at its peak (the evaluator's saved states,
#: orders, starts, the rules' schedules and the compaction at the end): peak resident
#: memory over ``n`` of ``local-search`` and ``alns`` on mixed backlogs of 5,000 and
#: 50,000 requests, rounded up. Checked against the memory budget before the search.
SEARCH_REQUEST_BYTES = 3584


def require_search_memory(
    owner: str, instance: Instance, budget: Budget, history: int = 0
) -> None:
    """Refuse, before it starts, a search whose arrays (:data:`SEARCH_REQUEST_BYTES` a
    request, and a late-acceptance list of ``history`` entries) would pass ``budget``'s
    memory budget (:class:`~schedlab.errors.MemoryBudgetError` naming ``owner``)."""
    size = SEARCH_REQUEST_BYTES * instance.n + 8 * history
    budget.require(owner, size, f"a search over {instance.n:,} requests")


#: Acceptance rules of :func:`improve_order` (module docs).
STRATEGIES: tuple[str, ...] = ("first", "best", "late")

#: Moves ``local-search`` makes when ``work`` is not given: a few seconds on the shipped
#: mixed backlogs (``benchmarks/offline_targets.py``, rows gap1000 and gap10000, times it).
DEFAULT_MOVES = 60_000

#: Objective given to a move the screen cut off (worse than any schedule).
_SCREENED = 2**62

#: Engines of the ``late`` search on a backlog: the compiled loop
#: (:mod:`~schedlab.offline.solvers.compiled_search`) and the reference, here.
ENGINES: tuple[str, ...] = ("compiled", "python")

#: Largest ``width``: above it numba's bounded draw leaves NumPy's stream, and the two
#: engines would make different moves (:mod:`~schedlab.offline.solvers.compiled_search`).
MAX_WIDTH = 2**31 - 1

#: Largest ``idle``: the compiled search keeps it in a 64-bit integer.
MAX_IDLE = 2**63 - 1

#: Largest late-acceptance ``history``: its list takes 8 bytes an entry (80 MB here), and
#: the longest runs measured use 10,000 (``lp_guided``'s docs).
MAX_HISTORY = 10_000_000


def best_start_order(
    instance: Instance, *, budget: Budget | None = None
) -> tuple[np.ndarray, str]:
    """The order, among the rules' and Sorted-F's, whose strict decode is best."""
    candidates = {rule: priority_order(instance, rule) for rule in RULES}
    batches, _ = sorted_f_batches(instance, method="fast", budget=budget)
    candidates["sorted-f"] = batch_order(batches)
    scores = {
        name: total_latency(instance, list_schedule(instance, order))
        for name, order in candidates.items()
    }
    name = min(scores, key=lambda k: scores[k])
    return candidates[name], name


@dataclass(frozen=True)
class SearchSettings:
    """How :func:`improve_order` searches (module docs).

    Attributes
    ----------
    strategy
        Acceptance rule, one of :data:`STRATEGIES`.
    width
        The second position of a move lies within this many positions of the first.
    neighbours
        Moves sampled per step by ``best``.
    history
        Late-acceptance list length (``late`` only).
    screen
        First screening distance of the incremental evaluation (``None``: exact only).
    work
        The work budget: moves evaluated (``None``: only a wall-clock cap or ``idle``
        ends the search; without ``idle`` it is then not reproducible).
    idle
        The search's own end: it stops once this many moves have been made since the
        best objective last fell (``None``: never; module docs, "Idle moves").
    checkpoint
        Positions between saved decoder states; ``None``: :func:`checkpoint_spacing`
        (wider for exact evaluation).
    engine
        One of :data:`ENGINES`: how ``late`` runs on a backlog (the other strategies,
        and every search with releases, run in :func:`improve_order`'s Python loop).
        Both make the same moves.
    solver
        The solver whose options these are, named in error messages.

    Raises
    ------
    InputError, InputTypeError
        On an unknown strategy or engine, a count that is not an integer or is below 1,
        a width above :data:`MAX_WIDTH`, a history above :data:`MAX_HISTORY` or an
        ``idle`` above :data:`MAX_IDLE`.
    """

    strategy: str = "late"
    width: int = 5
    neighbours: int = 20
    history: int = 150
    screen: int | None = 8
    work: int | None = DEFAULT_MOVES
    idle: int | None = None
    checkpoint: int | None = None
    engine: str = "compiled"
    solver: str = "local-search"

    def __post_init__(self) -> None:
        name = self.solver
        if self.strategy not in STRATEGIES:
            raise InputError(
                f"{name}: strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}"
            )
        if self.engine not in ENGINES:
            raise InputError(
                f"{name}: engine must be one of {', '.join(ENGINES)}, got {self.engine!r}"
            )
        optional = ("screen", "work", "idle", "checkpoint")
        for field in ("width", "neighbours", "history", *optional):
            value = getattr(self, field)
            if value is None and field in optional:
                continue
            try:  # both engines see the same Python integers
                object.__setattr__(self, field, operator.index(value))
            except TypeError:
                raise InputTypeError(
                    f"{name}: {field} must be an integer, got {value!r}"
                ) from None
        for field in ("width", "neighbours", "history"):
            if getattr(self, field) < 1:
                raise InputError(f"{name}: {field} must be >= 1, got {getattr(self, field)}")
        if self.width > MAX_WIDTH:
            raise InputError(f"{name}: width must be <= {MAX_WIDTH:,}, got {self.width}")
        if self.history > MAX_HISTORY:
            raise InputError(f"{name}: history must be <= {MAX_HISTORY:,}, got {self.history}")
        if self.idle is not None and self.idle > MAX_IDLE:
            raise InputError(f"{name}: idle must be <= {MAX_IDLE:,}, got {self.idle}")
        if self.work is not None and self.work < 0:
            raise InputError(f"{name}: work must be >= 0, got {self.work}")
        for field in ("screen", "idle"):
            value = getattr(self, field)
            if value is not None and value < 1:
                raise InputError(f"{name}: {field} must be >= 1 or None, got {value}")


def random_move(
    order: np.ndarray, rng: np.random.Generator, width: int
) -> tuple[np.ndarray, int, int]:
    """A swap or an insertion (even odds) of two positions at most ``width`` apart.

    Returns the moved copy of ``order`` and the first and last positions it changes.
    """
    n = len(order)
    i = int(rng.integers(n))
    j = min(max(i + int(rng.integers(-width, width + 1)), 0), n - 1)
    if j == i:
        j = (i + 1) % n
    new = order.copy()
    if rng.random() < 0.5:
        new[i], new[j] = order[j], order[i]
    else:  # take the request at i out and put it at j
        if i < j:
            new[i:j] = order[i + 1 : j + 1]
        else:
            new[j + 1 : i + 1] = order[j:i]
        new[j] = order[i]
    return new, min(i, j), max(i, j)


def improve_order(
    instance: Instance,
    order: np.ndarray,
    settings: SearchSettings,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Improve ``order`` by swap / insert moves (module docs).

    Stops after ``settings.work`` moves, after ``settings.idle`` moves since the
    best objective last fell, or when ``budget`` runs out, whichever comes first; at
    least one of them must be set. Returns the best order found and statistics: moves
    evaluated and accepted, the moves made when the best objective last fell
    (``improved``), moves per second, positions decoded per move (backlogs; a full
    decode is ``n``), full decodes (with releases), the strict objective reached, and
    what stopped the search early (``stopped_by``: ``None`` when it ended by itself, by
    ``idle`` or for want of a move).
    """
    # Over 100 lines by design: the reference loop that the compiled late-acceptance kernel
    # follows move for move, kept whole so that the two read side by side.
    if not budget.limited and settings.work is None and settings.idle is None:
        raise InputError(
            f"{settings.solver}: set time_limit, work or idle (the search has no end otherwise)"
        )
    strategy, width, history = settings.strategy, settings.width, settings.history
    screen = settings.screen
    rng = np.random.default_rng(seed)
    began = time.perf_counter()
    stop = budget.stop(settings.work)
    n = instance.n
    current = order_array(order, n)
    moves = full = accepted = improved = 0
    idle = settings.idle
    searching = n >= 2  # else no move exists
    backlog = searching and int(instance.arrival.max()) == 0
    spacing = settings.checkpoint
    if spacing is None:
        spacing = checkpoint_spacing(n, exact=settings.screen is None)
    evaluator = OrderEvaluator(instance, current, spacing) if backlog else None

    def evaluate(candidate: np.ndarray, lo: int, hi: int, allow: int) -> tuple[int, Move | None]:
        """Objective of ``candidate`` (``inf``-like when screened out) and its move."""
        nonlocal full
        if evaluator is None:
            full += 1
            return total_latency(instance, list_schedule(instance, candidate)), None
        move = evaluator.evaluate(candidate, lo, hi, screen, allow)
        if move is None:
            return _SCREENED, None
        return move.total + evaluator.output_total, move

    value = (
        evaluator.objective()
        if evaluator
        else total_latency(instance, list_schedule(instance, current))
    )
    best_value, best_order = value, current
    if strategy == "late" and evaluator is not None and settings.engine == "compiled":
        best_order, best_value, moves, accepted, improved = evaluator.search_late(
            rng, width, history, screen, stop, idle
        )
        searching = False  # done: the reference loop below is not run
    late = [value] * history if searching else []  # late-acceptance list ("late")
    while searching and stop.reason is None:
        if idle is not None and moves - improved >= idle:
            break
        if strategy == "late":
            if stop():
                break
            candidate, lo, hi = random_move(current, rng, width)
            threshold = max(late[moves % history], value)
            total, move = evaluate(candidate, lo, hi, threshold - value)
            if total <= threshold:
                value, current = total, candidate
                if move is not None and evaluator is not None:
                    evaluator.accept(candidate, move)
                accepted += 1
                if value < best_value:
                    best_value, best_order, improved = value, current, moves + 1
            late[moves % history] = value
            moves += 1
            continue
        tries = 1 if strategy == "first" else settings.neighbours
        best: tuple[int, np.ndarray, Move | None] | None = None
        for _ in range(tries):
            if stop():
                break
            candidate, lo, hi = random_move(current, rng, width)
            moves += 1
            total, move = evaluate(candidate, lo, hi, -1)
            if total < value and (best is None or total < best[0]):
                best = (total, candidate, move)
        if best is not None:
            value, current, move = best
            if evaluator is not None and move is not None:
                evaluator.accept(current, move)
            accepted += 1
            best_value, best_order, improved = value, current, moves
    elapsed = time.perf_counter() - began
    return best_order, {
        "moves": moves,
        "accepted": accepted,
        "improved": improved,
        "decoded_per_move": evaluator.decoded / moves if evaluator and moves else float(n),
        "met": evaluator.met if evaluator else 0,
        "full_evaluations": full,
        "moves_per_s": moves / elapsed if elapsed > 0 else 0.0,
        "objective_strict": best_value,
        "stopped_by": stop.reason,
    }


def local_search(
    instance: Instance,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
    strategy: str = "late",
    width: int = 5,
    neighbours: int = 20,
    history: int = 150,
    screen: int | None = 8,
    work: int | None = DEFAULT_MOVES,
    idle: int | None = None,
    engine: str = "compiled",
) -> SolverOutput:
    """Swap / insert local search on priority orders (module docs).

    Options are the fields of :class:`SearchSettings`. Same seed, same moves: with the
    default work budget the result is reproducible exactly, unless the wall-clock cap
    binds first (``stats["stopped_by"]``).
    """
    settings = SearchSettings(
        strategy, width, neighbours, history, screen, work, idle, engine=engine
    )
    require_search_memory("local-search", instance, budget, settings.history)
    # the backfilling MC-SF schedule is often the best rule's; never return worse than it
    # (decoded first, so that a wall-clock cap counts it: 5 s at n = 10^6)
    mc_sf = rule_schedule(instance, "mc-sf-backfill")
    order, start = best_start_order(instance, budget=budget.share(0.25))
    order, stats = improve_order(instance, order, settings, budget=budget.share(0.9), seed=seed)
    starts, chosen = decode_compacted(instance, order, {"mc-sf-backfill": mc_sf}, budget=budget)
    stopped = stopped_by(stats["stopped_by"], chosen["left_shift"]["stopped_by"])
    return SolverOutput(starts, stats={**stats, "start": start, **chosen, "stopped_by": stopped})
