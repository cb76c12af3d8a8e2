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
On a backlog (all releases 0) strict list scheduling starts the requests in order, each
in the first round, no earlier than its predecessor's start, in which it fits
(:class:`~schedlab.offline.decoder.StrictDecoder`). The evaluator keeps the current
order's starts and the decoder's state before every ``checkpoint``-th position. A move
that changes only positions ``lo..hi`` resumes from the last saved state at or before
``lo`` and decodes the new order until, at a saved position ``p > hi``, the new state is
the old one shifted by ``delta`` rounds
(:meth:`~schedlab.offline.decoder.DecoderState.same_running`: the same running
requests with the same remaining rounds and tokens held). Both orders hold the same
requests from ``p`` on and the decoder is invariant under shifts in time, so every
later start moves by exactly ``delta``: the new total is the old one plus the start
changes on ``lo..p-1`` plus ``delta (n - p)``. Evaluation is exact; its cost is the
number of positions decoded until the two runs meet again, not ``n``. The decoding runs
in the compiled kernel :func:`~schedlab.offline.compiled_decoder.evaluate_kernel`, the
same procedure as ``StrictDecoder`` (``proofs/list_scheduling.md``, §3–4); its
objectives equal full reference decodes in ``tests/offline/test_compiled_decoder.py``.

The strict decode is chaotic, though: a changed start shifts later fits by a round or
two, which shift others, and on the mixed backlogs the two runs seldom meet again
(``stats["met"]``), so an exact evaluation costs about ``n - lo`` positions. With
``screen`` set (default 8), a move is screened at the positions
``hi + 1 + screen 4^k`` (``k = 0, 1, ...``) its decode reaches before the runs meet: it
is abandoned there unless the start changes so far are negative *and* so is that sum
plus the last change times the positions left (a heuristic cut: an abandoned move may
in fact improve). Moves that pass every screen are decoded exactly, and only
exact improvements are accepted (``late``: a move is cut where the estimate exceeds
the objective it may reach and still be accepted). With releases, every move is evaluated
by a full :func:`~schedlab.offline.decoder.list_schedule` call.

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

from schedlab.budget import UNLIMITED, Budget, Stop, stopped_by
from schedlab.errors import InputError, InputTypeError
from schedlab.offline.decoder import list_schedule, order_array
from schedlab.offline.instance import Instance
from schedlab.offline.priority import RULES, priority_order, rule_schedule
from schedlab.offline.result import SolverOutput
from schedlab.offline.schedule import total_latency
from schedlab.offline.solvers.left_shift import decode_compacted
from schedlab.offline.solvers.sorted_f import batch_order, sorted_f_batches

__all__ = [
    "DEFAULT_MOVES",
    "ENGINES",
    "MAX_HISTORY",
    "MAX_IDLE",
    "MAX_WIDTH",
    "SEARCH_REQUEST_BYTES",
    "STRATEGIES",
    "Move",
    "OrderEvaluator",
    "SearchSettings",
    "best_start_order",
    "checkpoint_spacing",
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

#: Moves of the compiled search's first batch, the most in one, and the seconds a batch
#: is sized to take (the wall-clock cap is checked between batches).
_FIRST_BATCH, _MAX_BATCH, _BATCH_SECONDS = 16, 1 << 16, 0.02

#: Largest ``width``: above it numba's bounded draw leaves NumPy's stream, and the two
#: engines would make different moves (:mod:`~schedlab.offline.solvers.compiled_search`).
MAX_WIDTH = 2**31 - 1

#: Largest ``idle``: the compiled search keeps it in a 64-bit integer.
MAX_IDLE = 2**63 - 1

#: Largest late-acceptance ``history``: its list takes 8 bytes an entry (80 MB here), and
#: the longest runs measured use 10,000 (``lp_guided``'s docs).
MAX_HISTORY = 10_000_000


@dataclass(frozen=True)
class Move:
    """An evaluated order change, as :meth:`OrderEvaluator.accept` applies it.

    Attributes
    ----------
    base
        First position decoded (a checkpoint at or before the first changed one).
    stop
        Position from which the new starts are the old ones plus ``delta`` (``n`` when
        the two runs never met).
    delta
        Rounds by which every start from ``stop`` on moves.
    starts
        New starts of positions ``base .. stop - 1``.
    total
        Sum of the new order's starts.
    serial
        Which evaluation of its evaluator produced it: the new decoder states are kept
        by the evaluator until the next evaluation, and :meth:`OrderEvaluator.accept`
        decodes them again for an older move.
    """

    base: int
    stop: int
    delta: int
    starts: np.ndarray
    total: int
    serial: int


def checkpoint_spacing(n: int, *, exact: bool) -> int:
    """The default positions between an evaluator's saved states.

    ``max(8, n // 1000)`` for exact evaluation (``screen=None``), ``max(1, n // 1000)``
    for screened evaluation.

    A state saved at every position costs a copy of the running set (about 30 requests
    on the shipped mixed n = 1,000) at every position decoded; a wider spacing decodes
    about half a spacing more positions a move, from the last state before the move, and
    notices later that the two runs met (``python benchmarks/local_search_speed.py
    --spacings 1 4 8 16 32`` measures the trade). The states take ``O(n / spacing)``
    running sets of room, hence ``n // 1000`` on large backlogs.

    An exact evaluation's objective, and so every move made, does not depend on the
    spacing. A screened one's can: between the position where the runs meet and the
    next saved state the decode goes on, and a screen there tests the start changes so
    far, which exceed the final total when the runs met ``delta < 0`` rounds earlier,
    so a spacing that notices the meeting later may cut a move that another accepts.
    Screened searches on small instances were seen to end differently across spacings,
    default ``local-search`` on the shipped Jaillet instances among them.
    Screened evaluation therefore keeps the spacing it had before, and with it the
    results.
    """
    return max(8 if exact else 1, n // 1000)


class OrderEvaluator:
    """Strict list scheduling of orders on a backlog, evaluated incrementally (module docs).

    The decoding runs in :func:`~schedlab.offline.compiled_decoder.evaluate_kernel`;
    the saved decoder states (:class:`~schedlab.offline.decoder.DecoderState`'s round,
    ``remaining`` and ``held``) lie in flat arrays, one segment per checkpoint. Accepting
    a move writes its states in place
    (:func:`~schedlab.offline.compiled_decoder.accept_kernel`) and moves the later
    segments only when the count of running requests changed (the array keeps spare
    room), which costs far less than rebuilding it (``docs/design.md``, "Decision
    record"). :meth:`search_late` runs a whole ``late`` search on these arrays.

    Parameters
    ----------
    instance
        A backlog (every release round 0).
    order
        The current order.
    checkpoint
        Positions between saved decoder states; ``None``: :func:`checkpoint_spacing` for
        screened evaluation (the spacing that keeps every evaluation's result).
    """

    def __init__(
        self, instance: Instance, order: np.ndarray, checkpoint: int | None = None
    ) -> None:
        if int(instance.arrival.max()) != 0:
            raise InputError("OrderEvaluator: needs a backlog (every release round 0)")
        n = instance.n
        self.every = (
            checkpoint_spacing(n, exact=False) if checkpoint is None else max(1, int(checkpoint))
        )
        self.order = order_array(order, n)
        self.output_total = int(instance.output.sum())
        self._memory = instance.kv_tokens
        self._lengths = np.stack([instance.prompt, instance.output]).astype(np.int64)
        checkpoints = -(-n // self.every)
        self.starts = np.zeros(n, dtype=np.int64)  # by position
        self._index = np.zeros((2, checkpoints + 1), dtype=np.int64)  # rounds, pool offsets
        # C_j - t and w_j + t of each state, in index[1, -1] columns (the rest spare)
        self._pool = np.zeros((2, 0), dtype=np.int64)
        # numba (and through it scipy) loads on the first evaluator, not with the package
        from schedlab.offline import compiled_decoder

        self._kernel = compiled_decoder.evaluate_kernel
        self._accept_kernel = compiled_decoder.accept_kernel
        self._running = compiled_decoder.new_running(n)
        self._new_starts = np.empty(n, dtype=np.int64)
        self._new_index = np.empty_like(self._index)
        self._new_pool = np.empty((2, 4 * n), dtype=np.int64)
        self._result = np.zeros(6, dtype=np.int64)
        self._serial = 0
        self.total = 0
        self.decoded = 0  # positions decoded by evaluate, all moves together
        self.met = 0  # evaluations that stopped where the two runs met
        full = self._decode(self.order, 0, n - 1, -1, -1)  # no screen: never cut
        assert full is not None
        self.accept(self.order, full)
        self.decoded = 0

    def objective(self) -> int:
        """Total latency of the current order's strict schedule."""
        return self.total + self.output_total

    def _decode(self, order: np.ndarray, lo: int, hi: int, screen: int, allow: int) -> Move | None:
        """Run the kernel (growing the state buffer until it fits); ``None`` if cut."""
        result = self._result
        while True:
            self._kernel(
                self._lengths,
                self._memory,
                order,
                lo,
                hi,
                self.every,
                self.starts,
                self._index,
                self._pool,
                screen,
                allow,
                self._running,
                self._new_starts,
                self._new_index,
                self._new_pool,
                result,
            )
            if result[0] >= 0:
                break
            self._grow_new_pool()
        self._serial += 1
        self.decoded += int(result[4])
        if result[0] == 0:
            return None
        self.met += int(result[0] == 1)
        base, stop = lo - lo % self.every, int(result[1])
        starts = self._new_starts[: stop - base].copy()
        return Move(base, stop, int(result[2]), starts, self.total + int(result[3]), self._serial)

    def evaluate(
        self,
        order: list[int] | np.ndarray,
        lo: int,
        hi: int,
        screen: int | None = None,
        allow: int = -1,
    ) -> Move | None:
        """Decode ``order``, equal to the current order outside ``lo..hi``, incrementally.

        Returns ``None`` only when ``screen`` cut the move off (module docs): at a
        screening position the move is abandoned unless the change of the total so far,
        and that change plus the last start change times the positions left, are both
        at most ``allow`` (``-1``: the move must look improving).
        """
        array = np.ascontiguousarray(order, dtype=np.int64)  # the kernel's signature
        return self._decode(array, lo, hi, -1 if screen is None else screen, allow)

    def try_move(
        self, order: list[int] | np.ndarray, lo: int, hi: int, screen: int | None = None
    ) -> Move | None:
        """:meth:`evaluate` the move; the :class:`Move` if it lowers the total, else ``None``."""
        move = self.evaluate(order, lo, hi, screen)
        return move if move is not None and move.total < self.total else None

    def accept(self, order: list[int] | np.ndarray, move: Move) -> None:
        """Make ``order`` (evaluated by :meth:`evaluate`, no move accepted since) the
        current order."""
        array = np.ascontiguousarray(order, dtype=np.int64)
        base, stop, delta = move.base, move.stop, move.delta
        if move.serial != self._serial:  # its states were overwritten: decode them again
            decoded = self.decoded
            self._decode(array, base, stop - 1, -1, -1)
            self.decoded = decoded
        first, count = base // self.every, int(self._result[5])
        begin, end = self._index[1, first], self._index[1, first + count]
        self._reserve(int(self._index[1, -1] + self._new_index[1, count] - (end - begin)))
        self._accept_kernel(
            base,
            stop,
            delta,
            count,
            self.every,
            move.starts,
            self._new_index,
            self._new_pool,
            self.starts,
            self._index,
            self._pool,
        )
        self.order = array
        self.total = move.total

    def search_late(
        self,
        rng: np.random.Generator,
        width: int,
        history: int,
        screen: int | None,
        stop: Stop,
        idle: int | None = None,
    ) -> tuple[np.ndarray, int, int, int, int]:
        """Late-acceptance moves (module docs) in the compiled kernel until ``stop`` or
        ``idle`` ends them.

        The moves, their acceptance and the order returned are those of
        :func:`improve_order`'s ``late`` loop with ``engine="python"`` (same ``rng``
        state, same settings): :mod:`~schedlab.offline.solvers.compiled_search`. The
        kernel runs in batches granted by :meth:`Stop.take <schedlab.budget.Stop.take>`,
        each sized to take about 20 ms and, under a wall-clock cap, no longer than the
        time left at the last batch's pace; the cap is checked between batches.

        Parameters
        ----------
        rng
            The move generator (advanced as the reference loop advances it).
        width, history, screen
            As in :class:`SearchSettings` (checked there: ``1 <= width <=``
            :data:`MAX_WIDTH`, ``history >= 1``, ``screen`` ``None`` or ``>= 1``).
        stop
            The work budget and the wall-clock cap.
        idle
            End once this many moves have passed since the best objective last fell
            (``None``: only ``stop`` ends the search).

        Returns
        -------
        tuple
            The best order, its objective, the moves made, the moves accepted, and the
            moves made when the best objective last fell. Afterwards the evaluator's
            current order is the last one accepted.
        """
        from schedlab.offline.solvers import compiled_search as cs  # numba loads here

        current = self.order.copy()  # the caller's array is not written
        candidate, best = current.copy(), current.copy()
        late = np.full(history, self.objective(), dtype=np.int64)
        state = np.zeros(len(cs.STATE), dtype=np.int64)
        field = {name: k for k, name in enumerate(cs.STATE)}
        state[field["total"]] = self.total
        state[field["best"]] = self.objective()
        state[field["idle"]] = -1 if idle is None else idle
        batch = _FIRST_BATCH
        moves, improved = field["moves"], field["improved"]
        # the idle moves are counted before the budget, as the reference loop counts them
        while (idle is None or state[moves] - state[improved] < idle) and (
            granted := stop.take(batch)
        ):
            state[field["target"]] += granted
            began = time.perf_counter()
            while True:
                cs.late_acceptance_kernel(
                    self._lengths,
                    self._memory,
                    self.every,
                    -1 if screen is None else screen,
                    width,
                    self.output_total,
                    current,
                    candidate,
                    best,
                    self.starts,
                    self._index,
                    self._pool,
                    self._running,
                    self._new_starts,
                    self._new_index,
                    self._new_pool,
                    self._result,
                    late,
                    rng,
                    state,
                )
                code = state[field["code"]]
                if code in (cs.DONE, cs.IDLE):
                    break
                if code == cs.GROW_POOL:
                    self._reserve(int(self._index[1, -1]) + self._new_pool.shape[1])
                else:
                    self._grow_new_pool()
            per_move = max(time.perf_counter() - began, 1e-9) / granted
            batch = int(min(_MAX_BATCH, max(_FIRST_BATCH, _BATCH_SECONDS / per_move)))
            if stop.budget.limited:
                batch = min(batch, max(1, int(stop.budget.remaining() / per_move)))
        total, decoded, met, value, made, accepted, last = (
            int(state[field[name]])
            for name in ("total", "decoded", "met", "best", "moves", "accepted", "improved")
        )
        self._serial += 1  # a Move evaluated before is no longer this evaluator's
        self.order, self.total = current, total
        self.decoded += decoded
        self.met += met
        return best, value, made, accepted, last

    def _grow_new_pool(self) -> None:
        """Double the room for the states of one decode."""
        self._new_pool = np.empty((2, 2 * self._new_pool.shape[1]), dtype=np.int64)

    def _reserve(self, columns: int) -> None:
        """Give the saved states' pool room for at least ``columns`` (doubling)."""
        if columns > self._pool.shape[1]:
            pool = np.empty((2, 2 * columns), dtype=np.int64)
            used = int(self._index[1, -1])
            pool[:, :used] = self._pool[:, :used]
            self._pool = pool

    def schedule(self) -> np.ndarray:
        """Start round of each request under the current order."""
        starts = np.empty(len(self.order), dtype=np.int64)
        starts[self.order] = self.starts
        return starts


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
