"""What a batch-formation policy may see: a small, explicit view of the engine.

A policy (:mod:`schedlab.serving.policies`) plans each iteration from an
:class:`EngineView` and the :class:`RequestView` of each prefill candidate; it never
touches the engine's own state. The engine (:mod:`schedlab.serving.engine`) implements
both, and checks every plan it gets back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.prediction import Estimate, refined_output

__all__ = [
    "BlockRules",
    "EngineView",
    "Plan",
    "RequestView",
    "admissible",
    "chunk_blocks",
    "decode_kv_peak",
    "final_tokens",
    "max_chunk",
    "planned_output",
    "reserved_tokens",
]


class RequestView(Protocol):
    """What a policy may read of a request."""

    @property
    def index(self) -> int: ...
    @property
    def prompt(self) -> int: ...
    @property
    def target(self) -> int:
        """Tokens this (re)start must have in KV: the prompt plus tokens generated before."""
        ...

    @property
    def done(self) -> int:
        """Tokens of ``target`` already in KV: prefilled, or (waiting after a preemption)
        still in the prefix cache; the next chunk's prior context."""
        ...

    @property
    def admitted(self) -> bool:
        """Whether the request holds a seat (``max_num_seqs``) and KV blocks."""
        ...

    @property
    def held_hits(self) -> int:
        """Waiting: the blocks of its cached prefix (``done``) that running requests hold,
        which it shares without taking a free block (:mod:`schedlab.serving.kv_cache`);
        0 when admitted."""
        ...

    @property
    def predicted_output(self) -> int:
        """Its predicted output length (:mod:`schedlab.serving.prediction`); the true
        length stays hidden."""
        ...

    @property
    def predicted_lower(self) -> int:
        """The lower end of its predicted interval (at most :attr:`predicted_output`)."""
        ...

    @property
    def predicted_upper(self) -> int:
        """The upper end of its predicted interval (at least :attr:`predicted_output`)."""
        ...


class EngineView(Protocol):
    """What a policy may read of the engine at an iteration start."""

    @property
    def config(self) -> EngineConfig: ...
    @property
    def now_s(self) -> float: ...
    @property
    def n_decode(self) -> int: ...
    @property
    def decode_kv(self) -> int:
        """KV tokens the running decodes attend to, in total."""
        ...

    @property
    def decode_kv_max(self) -> int | None:
        """KV tokens of the longest running decode (``None``: not tracked, i.e. the
        predicted cost model does not use the decodes' spread, or no decode runs)."""
        ...

    @property
    def decode_kv_min(self) -> int | None:
        """KV tokens of the shortest running decode (``None`` as above)."""
        ...

    @property
    def last_token_s(self) -> float:
        """When every running decode produced its latest token (end of last iteration)."""
        ...

    @property
    def free_blocks(self) -> int:
        """KV blocks free after this iteration's decode growth is reserved."""
        ...

    @property
    def free_seats(self) -> int:
        """``max_num_seqs`` minus admitted requests."""
        ...

    @property
    def admitting(self) -> bool:
        """Whether waiting requests may be admitted this iteration (``False`` after a
        preemption in it, as in vLLM)."""
        ...

    @property
    def has_prefill_work(self) -> bool: ...
    def prefill_candidates(self) -> Iterable[RequestView]:
        """Partly prefilled admitted requests (admission order), then, if
        :attr:`admitting`, the waiting queue in order."""
        ...

    def chunk_blocks(self, request: RequestView, chunk: int) -> int:
        """Free blocks a chunk of ``chunk`` tokens of ``request`` takes (a waiting request
        also takes back its cached blocks)."""
        ...

    def max_chunk(self, request: RequestView, free_blocks: int) -> int:
        """The largest chunk of ``request`` that ``free_blocks`` blocks hold."""
        ...

    def admissible(self, request: RequestView, free_blocks: int) -> bool:
        """Whether a waiting ``request`` passes the admission gate with ``free_blocks``
        free (its whole sequence must fit, when the engine reserves it; admitted
        requests always pass)."""
        ...

    def take(self, request: RequestView, chunk: int) -> bool:
        """Give ``request`` a chunk of ``chunk`` tokens, now, in plan order; ``False`` when
        it cannot run (the engine preempted it to make room, or admits nothing more in
        this iteration), and the plan ends there.

        A policy calls it for each chunk of its plan before it looks at the next
        candidate, and returns the chunks it took: the engine allocates each one as vLLM's
        scheduler does, so the next candidates' ``done`` and ``held_hits`` (blocks the
        chunk just cached), :attr:`free_blocks`, :attr:`free_seats` and
        :attr:`admitting` are those the next chunk meets. (A plan returned without
        ``take`` is applied afterwards, on a view that did not see its own chunks.)"""
        ...

    def projected_kv_peak(self, estimate: Estimate = "point") -> int:
        """The most KV tokens (with each request's last-block slack) the admitted
        requests will hold at once if each stops at its output as ``estimate`` plans it
        (:func:`planned_output`;
        :meth:`schedlab.serving.policy_view.PolicyView.projected_kv_peak`)."""
        ...


class BlockRules:
    """The block arithmetic of :class:`EngineView` (:func:`chunk_blocks`,
    :func:`max_chunk`, :func:`admissible`) on the view's own ``config``, for the classes
    that implement the view."""

    __slots__ = ()
    config: EngineConfig

    def chunk_blocks(self, request: RequestView, chunk: int) -> int:
        return chunk_blocks(self.config, request, chunk)

    def max_chunk(self, request: RequestView, free_blocks: int) -> int:
        return max_chunk(self.config, request, free_blocks)

    def admissible(self, request: RequestView, free_blocks: int) -> bool:
        return admissible(self.config, request, free_blocks)


#: A policy's answer: prefill chunks ``(request, tokens)`` for this iteration.
Plan = list[tuple[RequestView, int]]


def _held(config: EngineConfig, request: RequestView) -> int:
    """Blocks a request has without taking them from the free pool: all of its ``done``
    tokens' when admitted; waiting, the cached ones running requests hold."""
    return config.blocks(request.done) if request.admitted else request.held_hits


def chunk_blocks(config: EngineConfig, request: RequestView, chunk: int) -> int:
    """Free blocks a chunk takes: the blocks of ``done + chunk`` tokens, less those the
    request has already. A waiting request's ``done`` tokens are in cached blocks: it
    takes the free ones from the pool and shares those running requests hold
    (:mod:`schedlab.serving.kv_cache`)."""
    return config.blocks(request.done + chunk) - _held(config, request)


def max_chunk(config: EngineConfig, request: RequestView, free_blocks: int) -> int:
    """The largest chunk :func:`chunk_blocks` fits in ``free_blocks``: the room of the
    blocks held and free, ``(held + free) * block_size - done``, and no more than is left."""
    room = (_held(config, request) + free_blocks) * config.block_size - request.done
    return max(0, min(request.target - request.done, room))


def admissible(config: EngineConfig, request: RequestView, free_blocks: int) -> bool:
    """The admission gate: with ``config.reserve_full_prompt`` a waiting request's whole
    sequence, ``blocks(target)``, less the cached blocks running requests hold, must fit in
    ``free_blocks`` (its free cached blocks count, as they are free); admitted requests
    always pass (``kv_cache_manager.py``, ``can_fit_full_sequence``)."""
    if request.admitted or not config.reserve_full_prompt:
        return True
    return config.blocks(request.target) - request.held_hits <= free_blocks


def planned_output(request: RequestView, estimate: Estimate, generated: int) -> int:
    """The output length ``estimate`` plans for ``request`` once it has emitted
    ``generated`` tokens: the point prediction, or the lower or upper end of its
    interval, refined by :func:`~schedlab.serving.prediction.refined_output`."""
    if estimate == "a-min":
        base = request.predicted_lower
    elif estimate == "a-max":
        base = request.predicted_upper
    else:
        base = request.predicted_output
    return refined_output(base, generated)


def final_tokens(request: RequestView, estimate: Estimate = "point") -> int:
    """The KV tokens ``request`` (not decoding) holds when it emits its last token as
    ``estimate`` plans it: ``prompt + planned - 1``, with the tokens it generated before
    a preemption (``target - prompt``) refining the plan (:func:`planned_output`)."""
    generated = request.target - request.prompt
    return request.prompt + planned_output(request, estimate, generated) - 1


def decode_kv_peak(holds: Sequence[int], rests: Sequence[int]) -> int:
    r"""The peak of :math:`E(k) = \sum_{j : r_j > k} (h_j + k)` over offsets :math:`k \ge 0`:
    decodes holding :math:`h_j` tokens now, each growing one token an iteration for
    :math:`r_j \ge 1` more iterations (0 for none). :math:`E` grows between the offsets
    where a decode leaves, so its maximum is at some :math:`k = r_j - 1`; sorted by
    :math:`r` descending, that value is the prefix sum of :math:`h` plus
    :math:`j\,(r_j - 1)`, all in :math:`O(n \log n)`."""
    if not holds:
        return 0
    rest = np.asarray(rests, dtype=np.int64)
    order = np.argsort(-rest, kind="stable")
    alive = np.cumsum(np.asarray(holds, dtype=np.int64)[order])
    count = np.arange(1, rest.size + 1)
    return int((alive + count * (rest[order] - 1)).max())


def reserved_tokens(
    config: EngineConfig, request: RequestView, estimate: Estimate = "point"
) -> int:
    """What ``sloweave-kv`` reserves for a request not yet decoding: the blocks of its
    :func:`final_tokens`, in tokens, and never more than the whole cache (a prediction
    longer than the cache cannot hold the request back once the engine is empty)."""
    blocks = min(config.blocks(final_tokens(request, estimate)), config.total_blocks)
    return blocks * config.block_size
