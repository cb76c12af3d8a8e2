"""Which profiled ops an iteration of each architecture runs, and how often: data.

An :class:`OpLayout` lists, for one architecture (``meta.yaml``'s ``architecture``), the ops
of ``dense.csv`` that run in every decoder layer and how many times, the ops that run once
per forward pass, the once-per-iteration ops of ``per_sequence.csv``, and whether each
layer runs a mixture-of-experts block (``moe.csv``). :data:`LAYOUTS` holds the built-ins;
:func:`register_layout` adds one.

A profile row is the time of *one call* of an op: the profiler divides an op's CUDA time
by its invocations, and vLLM's layer-wise profile merges sibling modules of the same
kind, so ops called twice per layer have one row that counts twice (LLMServingSim
``profiler/core/hooks/timings.py``). The layouts follow vLLM's model implementations:

* ``llama`` (``vllm/model_executor/models/llama.py``): ``input_layernorm`` and
  ``post_attention_layernorm`` (both RMSNorm: ``layernorm`` x2), ``qkv_proj``,
  ``rotary_emb``, ``o_proj``, ``gate_up_proj``, ``act_fn`` (SiLU and multiply),
  ``down_proj``; ``embedding`` and ``final_layernorm`` once; ``lm_head`` and
  ``sampler`` per sequence.
* ``qwen3`` (``qwen3.py``): llama's, plus ``q_norm`` and ``k_norm`` on the heads before
  the rotary embedding (one ``qk_norm`` row, the mean of the two: x2).
* ``qwen3_moe`` (``qwen3_moe.py``): qwen3's attention part, and in place of the MLP one
  ``Qwen3MoeSparseMoeBlock`` (router gate and fused experts, no shared expert).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from schedlab.errors import CalibrationError

__all__ = ["LAYOUTS", "OpLayout", "get_layout", "register_layout"]


@dataclass(frozen=True)
class OpLayout:
    """Which profiled ops an iteration runs, and how often.

    Attributes
    ----------
    per_layer
        Op name -> calls per decoder layer (scaled by the layer count).
    per_forward
        Ops run once per forward pass over all tokens.
    per_sequence
        Ops run once per iteration over the sequences that produce logits.
    experts
        Whether every layer also runs a mixture-of-experts block (``moe.csv``).
    """

    per_layer: Mapping[str, float]
    per_forward: tuple[str, ...] = ("embedding", "final_layernorm")
    per_sequence: tuple[str, ...] = ("lm_head", "sampler")
    experts: bool = False

    def __post_init__(self) -> None:
        if any(count < 0 for count in self.per_layer.values()):
            raise CalibrationError("op layout: calls per layer must be >= 0")
        object.__setattr__(self, "per_layer", MappingProxyType(dict(self.per_layer)))

    @property
    def dense_ops(self) -> tuple[str, ...]:
        """Every op the layout reads from ``dense.csv``."""
        return (*self.per_layer, *self.per_forward)


_ATTENTION = {"layernorm": 2, "qkv_proj": 1, "rotary_emb": 1, "o_proj": 1}
_MLP = {"gate_up_proj": 1, "act_fn": 1, "down_proj": 1}

#: The built-in layouts by ``meta.yaml`` architecture (module docstring).
LAYOUTS: dict[str, OpLayout] = {
    "llama": OpLayout({**_ATTENTION, **_MLP}),
    "qwen3": OpLayout({**_ATTENTION, "qk_norm": 2, **_MLP}),
    "qwen3_moe": OpLayout({**_ATTENTION, "qk_norm": 2}, experts=True),
}


def register_layout(architecture: str, layout: OpLayout) -> None:
    """Add (or replace) the layout of ``architecture``."""
    LAYOUTS[architecture] = layout


def get_layout(architecture: str, where: str = "meta.yaml") -> OpLayout:
    """The layout of ``architecture``.

    Raises
    ------
    CalibrationError
        Naming ``where`` and the known architectures.
    """
    layout = LAYOUTS.get(architecture)
    if layout is None:
        raise CalibrationError(
            f"{where}: architecture {architecture!r} has no op layout; known: "
            f"{', '.join(sorted(LAYOUTS))} (add one with "
            "schedlab.calibration.layouts.register_layout)"
        )
    return layout
