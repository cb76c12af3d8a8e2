"""Engine limits of a continuous-batching server and its paged KV-cache arithmetic.

The limits follow vLLM (Kwon et al., "Efficient Memory Management for Large Language
Model Serving with PagedAttention", SOSP 2023; vLLM engine arguments
``block_size``, ``max_num_seqs``, ``max_num_batched_tokens``). A request holding ``t``
KV tokens occupies ``ceil(t / block_size)`` blocks (DESIGN section 2).
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.errors import ServingError

__all__ = ["EngineConfig"]


@dataclass(frozen=True)
class EngineConfig:
    """Limits of one serving engine.

    Attributes
    ----------
    kv_capacity_tokens
        KV-cache capacity in tokens; the engine has ``kv_capacity_tokens // block_size``
        blocks. The default, 262,144 tokens, is 32 GiB of KV cache for a Llama-3.1-8B-like
        model (128 KiB per token: 32 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 bytes).
    block_size
        Tokens per KV block (vLLM's default is 16).
    max_num_seqs
        Most requests admitted at once (prefilling or decoding).
    max_num_batched_tokens
        Most tokens (one per decode plus every prefill-chunk token) in one iteration.
        Policies that never split a prompt may exceed it with a single whole prompt, as
        vLLM raises the budget to the model length when chunked prefill is off.
    """

    kv_capacity_tokens: int = 262_144
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192

    def __post_init__(self) -> None:
        for field in (
            "kv_capacity_tokens",
            "block_size",
            "max_num_seqs",
            "max_num_batched_tokens",
        ):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ServingError(f"engine.{field}: must be an integer >= 1, got {value!r}")
        if self.kv_capacity_tokens < self.block_size:
            raise ServingError(
                f"engine.kv_capacity_tokens: must hold at least one block of "
                f"{self.block_size} tokens, got {self.kv_capacity_tokens}"
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ServingError(
                "engine.max_num_batched_tokens: must be >= max_num_seqs "
                f"({self.max_num_seqs}) so every running decode fits, got "
                f"{self.max_num_batched_tokens}"
            )

    @property
    def total_blocks(self) -> int:
        """Number of KV blocks, ``floor(kv_capacity_tokens / block_size)``."""
        return self.kv_capacity_tokens // self.block_size

    def blocks(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` KV tokens: ``ceil(tokens / block_size)``."""
        return -(-tokens // self.block_size)

    def chunk_blocks(self, done: int, target: int, chunk: int) -> int:
        """New blocks for prefilling ``chunk`` more tokens of a prompt at ``done``/``target``.

        A chunk that completes the prompt also produces the first output token, whose KV
        slot is reserved in the same iteration, so the request then holds ``target + 1``.
        """
        after = done + chunk + (1 if done + chunk == target else 0)
        return self.blocks(after) - self.blocks(done)

    def max_chunk(self, done: int, target: int, free_blocks: int) -> int:
        """Largest chunk of the remaining ``target - done`` tokens that fits in ``free_blocks``.

        The request may fill its partly used last block and ``free_blocks`` new ones:
        ``room = (ceil(done / b) + free_blocks) * b - done`` tokens. Completing the prompt
        needs ``remaining + 1`` tokens of room (the first output token), so with
        ``room == remaining`` only ``remaining - 1`` tokens fit.
        """
        remaining = target - done
        room = (self.blocks(done) + free_blocks) * self.block_size - done
        return remaining if room > remaining else min(room, remaining - 1)
