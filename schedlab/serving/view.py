"""What a batch-formation policy may see: a small, explicit view of the engine.

A policy (:mod:`schedlab.serving.policies`) plans each iteration from an
:class:`EngineView` and the :class:`RequestView` of each prefill candidate; it never
touches the engine's own state. The engine (:mod:`schedlab.serving.engine`) implements
both, and checks every plan it gets back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from schedlab.serving.engine_config import EngineConfig

__all__ = ["EngineView", "Plan", "RequestView", "admissible", "chunk_blocks", "max_chunk"]


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


#: A policy's answer: prefill chunks ``(request, tokens)`` for this iteration.
Plan = list[tuple[RequestView, int]]


def chunk_blocks(config: EngineConfig, request: RequestView, chunk: int) -> int:
    """Free blocks a chunk takes: the blocks of ``done + chunk`` tokens, less those an
    admitted request holds already. A waiting request's ``done`` tokens are in cached
    free blocks, which it takes back (:mod:`schedlab.serving.kv_cache`)."""
    held = config.blocks(request.done) if request.admitted else 0
    return config.blocks(request.done + chunk) - held


def max_chunk(config: EngineConfig, request: RequestView, free_blocks: int) -> int:
    """The largest chunk :func:`chunk_blocks` fits in ``free_blocks``: the room of the
    blocks held and free, ``(held + free) * block_size - done``, and no more than is left."""
    held = config.blocks(request.done) if request.admitted else 0
    room = (held + free_blocks) * config.block_size - request.done
    return max(0, min(request.target - request.done, room))


def admissible(config: EngineConfig, request: RequestView, free_blocks: int) -> bool:
    """The admission gate: with ``config.reserve_full_prompt`` a waiting request's whole
    sequence, ``blocks(target)``, must fit in ``free_blocks`` (its cached blocks count, as
    they are free); admitted requests always pass."""
    if request.admitted or not config.reserve_full_prompt:
        return True
    return config.blocks(request.target) <= free_blocks
