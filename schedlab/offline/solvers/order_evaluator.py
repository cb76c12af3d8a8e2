r"""Strict list scheduling of orders on a backlog, evaluated incrementally: what every
search over orders (:mod:`~schedlab.offline.solvers.local_search`,
:mod:`~schedlab.offline.solvers.alns`, :mod:`~schedlab.offline.solvers.lp_guided`)
asks of a move.

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
in the compiled kernel :func:`~schedlab.offline.compiled_evaluation.evaluate_kernel`, the
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
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from schedlab.budget import Stop
from schedlab.errors import InputError
from schedlab.offline.decoder import order_array
from schedlab.offline.instance import Instance

__all__ = ["Move", "OrderEvaluator", "checkpoint_spacing"]

#: Moves of the compiled search's first batch, the most in one, and the seconds a batch
#: is sized to take (the wall-clock cap is checked between batches).
_FIRST_BATCH, _MAX_BATCH, _BATCH_SECONDS = 16, 1 << 16, 0.02


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

    The decoding runs in :func:`~schedlab.offline.compiled_evaluation.evaluate_kernel`;
    the saved decoder states (:class:`~schedlab.offline.decoder.DecoderState`'s round,
    ``remaining`` and ``held``) lie in flat arrays, one segment per checkpoint. Accepting
    a move writes its states in place
    (:func:`~schedlab.offline.compiled_evaluation.accept_kernel`) and moves the later
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
        from schedlab.offline import compiled_decoder, compiled_evaluation

        self._kernel = compiled_evaluation.evaluate_kernel
        self._accept_kernel = compiled_evaluation.accept_kernel
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
