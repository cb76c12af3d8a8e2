r"""Shared prompt prefixes: block hashes, the token ids they stand for, and a synthetic model.

A request stream may say which of its prompts share prefixes (:class:`SharedPrefixes`),
as the Mooncake trace does (Qin et al., "Mooncake", FAST 2025; its ``hash_ids``): each
prompt is cut into blocks of :math:`B` tokens (the last one partial) and each block has
an id, such that two prompts with the same id at block :math:`k` have the same tokens in
blocks :math:`0..k`. So the id of block :math:`k` names the whole prefix up to it (a
*chain* id, as vLLM's block hashes chain each block's tokens to its parent's hash,
``vllm/v1/core/kv_cache_utils.py``, ``hash_block_tokens``).

Token ids
    A prompt's token at position :math:`p` is a function of the id of its block,
    :math:`h_{\lfloor p/B \rfloor}`, and of :math:`p \bmod B` (:func:`prompt_token_ids`):
    equal prefixes are equal token ids, so any engine that hashes tokens (vLLM's prefix
    cache) finds the same sharing as the ids say.
Blocks of another size
    An engine of block size :math:`b` caches whole blocks of :math:`b` tokens. Its block
    :math:`j` holds tokens :math:`jb .. jb + b - 1`, all in trace blocks up to
    :math:`k = \lfloor (jb + b - 1)/B \rfloor`, so the prefix through it is named by
    :math:`(h_k, j)` (:func:`block_contents`), for any :math:`b` and :math:`B`: the mapping
    is exact because the tokens come from the ids. Only *full* engine blocks inside the
    prompt get a shared name; the others hold the request's own content.
What is not shared
    A request's generated tokens: a conversation's next turn resends the previous reply,
    but the reply's token ids are the engine's, not the trace's, so the ids cannot say
    that they match; the next turn shares the previous *prompt*.

Synthetic sharing (:class:`SharedPrefixModel`) gives a random workload the two shapes of
sharing production traces show: system prompts (a few fixed preambles that many
requests start with) and multi-turn conversations (a request that continues an earlier
one resends its prompt and adds its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schedlab.errors import ServingError

__all__ = [
    "SharedPrefixModel",
    "SharedPrefixes",
    "block_contents",
    "prompt_token_ids",
]


@dataclass(frozen=True)
class SharedPrefixes:
    """Which prompts of a stream share prefixes: per request its chain block ids.

    Attributes
    ----------
    block_tokens
        :math:`B`, the tokens per id (512 in the Mooncake trace).
    hash_ids
        One ``int64`` array per request, :math:`\\lceil P / B \\rceil` non-negative ids
        for a prompt of :math:`P` tokens (module docstring).
    """

    block_tokens: int
    hash_ids: tuple[np.ndarray, ...]

    def check(self, prompt: np.ndarray, where: str) -> None:
        """Raise :class:`~schedlab.errors.ServingError` naming ``where`` and the first
        request whose ids do not cover its ``prompt`` tokens exactly."""
        if self.block_tokens < 1:
            raise ServingError(f"{where}: block_tokens must be >= 1, got {self.block_tokens}")
        if len(self.hash_ids) != prompt.size:
            raise ServingError(
                f"{where}: {len(self.hash_ids)} hash id lists for {prompt.size} requests"
            )
        for k, (ids, tokens) in enumerate(zip(self.hash_ids, prompt.tolist(), strict=True)):
            need = -(-tokens // self.block_tokens)
            if ids.size != need or (ids.size and int(ids.min()) < 0):
                raise ServingError(
                    f"{where}: request {k}: {ids.size} hash ids for a prompt of {tokens} "
                    f"tokens; expected {need} non-negative ids (blocks of {self.block_tokens})"
                )

    def subset(self, keep: np.ndarray) -> SharedPrefixes:
        """The ids of the requests where ``keep`` (a boolean mask) is true."""
        return SharedPrefixes(self.block_tokens, tuple(np.asarray(self.hash_ids, object)[keep]))


def block_contents(ids: np.ndarray, block_tokens: int, block_size: int, prompt: int) -> list[int]:
    r"""The shared name :math:`h_k` of each full block of ``block_size`` tokens inside a
    prompt of ``prompt`` tokens with chain ids ``ids`` of ``block_tokens`` tokens
    (module docstring): :math:`h_{\lfloor (jb + b - 1)/B \rfloor}` for :math:`j <
    \lfloor P/b \rfloor` (the pair :math:`(h_k, j)` is the block's cache key)."""
    full = prompt // block_size
    last = (np.arange(full, dtype=np.int64) * block_size + block_size - 1) // block_tokens
    return ids[last].tolist()


#: Token ids are drawn from ``[_FIRST_TOKEN, _FIRST_TOKEN + _TOKEN_SPAN)``: clear of the
#: low ids (special tokens; the vLLM harness's own prompts use 1 and request numbers + 1)
#: and inside a 32k vocabulary.
_FIRST_TOKEN = 1000
_TOKEN_SPAN = 30_000


def prompt_token_ids(ids: np.ndarray, block_tokens: int, prompt: int) -> list[int]:
    r"""The ``prompt`` token ids of a request with chain ids ``ids``: token :math:`p` is a
    fixed mix of :math:`h_{\lfloor p/B \rfloor}` and :math:`p \bmod B` (a 64-bit
    multiply-xorshift, SplitMix64's finaliser, Steele et al., OOPSLA 2014), folded into
    30,000 ids from 1,000. Equal ids give equal tokens; different ids give different
    blocks but for a collision of all :math:`B` tokens, of probability
    :math:`30000^{-B}`."""
    positions = np.arange(prompt, dtype=np.uint64)
    size = np.uint64(block_tokens)
    x = ids.astype(np.uint64)[positions // size] * np.uint64(0x9E3779B97F4A7C15)
    x ^= (positions % size) + np.uint64(0x632BE59BD9B4E019)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return (x % np.uint64(_TOKEN_SPAN) + np.uint64(_FIRST_TOKEN)).astype(np.int64).tolist()


@dataclass(frozen=True)
class SharedPrefixModel:
    """Synthetic shared prefixes: system prompts and multi-turn conversations.

    Each request, in arrival order, is with probability ``followup`` the next turn of an
    earlier conversation (drawn uniformly among the last ``open_conversations`` started
    or continued), else the first turn of a new one. A new conversation starts, with
    probability ``system_share``, with one of ``system_prompts`` system prompts of
    ``system_tokens`` tokens each (drawn uniformly), then its own drawn prompt. A next
    turn resends the conversation's previous prompt, then its own drawn prompt; its
    prompt length is their sum, and a turn that would exceed ``max_prompt`` tokens
    starts a new conversation instead (history is never cut). Sharing is counted in
    whole blocks of ``block_tokens``: a block that mixes shared and new tokens is new.

    Attributes
    ----------
    system_prompts, system_tokens, system_share
        The system prompts: how many, their length, and the share of new conversations
        that start with one (0 turns them off).
    followup
        The probability that a request continues a conversation (0 turns them off).
    open_conversations
        How many recent conversations a next turn picks from.
    block_tokens
        :math:`B` of the ids (:class:`SharedPrefixes`).
    max_prompt
        The longest prompt a next turn may reach, tokens.
    """

    system_prompts: int = 8
    system_tokens: int = 1024
    system_share: float = 0.8
    followup: float = 0.5
    open_conversations: int = 64
    block_tokens: int = 16
    max_prompt: int = 32_768

    def __post_init__(self) -> None:
        for name in ("system_prompts", "system_tokens", "open_conversations", "block_tokens"):
            if getattr(self, name) < 1:
                raise ServingError(f"shared prefixes: {name} must be >= 1")
        for name in ("system_share", "followup"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ServingError(f"shared prefixes: {name} must be in [0, 1], got {value}")
        if self.max_prompt < self.system_tokens + 1:
            raise ServingError("shared prefixes: max_prompt must exceed system_tokens")

    def apply(
        self, prompt: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, SharedPrefixes]:
        """The prompt lengths with the shared parts added to the drawn ``prompt``
        lengths, and their ids; ids are numbered from 0 in order of first use."""
        size = self.block_tokens
        counter = [0]

        def fresh(count: int) -> list[int]:
            start = counter[0]
            counter[0] += count
            return list(range(start, start + count))

        systems = [fresh(self.system_tokens // size) for _ in range(self.system_prompts)]
        n = prompt.size
        draws = rng.random((n, 3))
        picks = rng.integers(0, 1 << 62, (n, 2))
        conversations: list[tuple[int, list[int]]] = []  # (prompt tokens, ids) of recent turns
        lengths = np.empty(n, np.int64)
        ids: list[np.ndarray] = []
        for k, own in enumerate(prompt.tolist()):
            head: Sequence[int] = ()
            shared = 0
            if conversations and draws[k, 0] < self.followup:
                slot = int(picks[k, 0] % len(conversations))
                tokens, history = conversations[slot]
                if tokens + own <= self.max_prompt:
                    shared, head = tokens, history
                    del conversations[slot]
            if not shared and draws[k, 1] < self.system_share:
                head = systems[int(picks[k, 1] % self.system_prompts)]
                shared = self.system_tokens
            total = shared + own
            whole = shared // size  # the ids of the shared full blocks carry over
            chain = list(head[:whole]) + fresh(-(-total // size) - whole)
            lengths[k] = total
            ids.append(np.asarray(chain, np.int64))
            conversations.append((total, chain))
            if len(conversations) > self.open_conversations:
                del conversations[0]
        return lengths, SharedPrefixes(size, tuple(ids))
