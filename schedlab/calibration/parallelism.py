r"""How one engine's GPUs share an iteration of the calibrated cost model: tensor and
expert parallelism, and the link their collectives cross.

A TP-:math:`t` engine runs each layer on :math:`t` GPUs and all-reduces the activations
twice a layer (after ``o_proj`` and after the MLP or expert block,
``vllm/model_executor/layers/linear.py`` lines 1531–1532), :math:`N h b` bytes for
:math:`N` tokens of hidden size :math:`h` at :math:`b` bytes, as vLLM runs it
(:meth:`~schedlab.llm.interconnect.Link.tensor_all_reduce_s`). With expert parallelism
the experts are spread, whole, over ``ep`` GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schedlab.calibration.deployment import MAX_TENSOR_PARALLEL
from schedlab.calibration.experts import MAX_EXPERTS
from schedlab.errors import FormatError
from schedlab.json_files import check_keys, json_integer, text_field
from schedlab.llm.interconnect import Link

__all__ = ["MAX_HIDDEN", "Parallelism"]

#: The widest hidden size read (elements): 16 times the widest of a published model
#: (Llama-3.1-405B, 16,384), so only a wrong value passes it.
MAX_HIDDEN = 2**18

_KEYS = ("tp", "ep", "hidden", "dtype_bytes", "link", "link_evidence")


@dataclass(frozen=True)
class Parallelism:
    """How one engine's GPUs share an iteration.

    Attributes
    ----------
    tp
        Tensor-parallel degree (the profile's ``tp<t>`` folder).
    hidden, dtype_bytes
        The model's hidden size and bytes per element: a collective moves
        ``tokens * hidden * dtype_bytes`` bytes.
    link
        The link between the GPUs (``None``: collectives are not modelled, which is exact
        only on one GPU).
    ep
        Expert-parallel degree: the experts are spread, whole, over ``ep`` GPUs (1: each
        expert's weights are split over the ``tp`` GPUs of an engine instead).
    link_evidence
        What ``link`` rests on (:class:`~schedlab.llm.link_evidence.LinkEvidence`'s
        ``kind``: ``measured``, ``published``, ``assumed``; ``""``: not recorded).
    """

    tp: int = 1
    hidden: int = 0
    dtype_bytes: int = 2
    link: Link | None = None
    ep: int = 1
    link_evidence: str = ""

    def collectives_s(self, tokens: int, layers: int) -> float:
        """Two all-reduces of the batch's activations a layer, :math:`2 L\\, T_{AR}(N h b,
        t)`, for ``tokens`` tokens and ``layers`` layers (0 on one GPU or without a
        link)."""
        if self.tp <= 1 or self.link is None or tokens <= 0:
            return 0.0
        size = tokens * self.hidden * self.dtype_bytes
        return 2 * layers * self.link.tensor_all_reduce_s(size, self.tp)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the ``parallelism`` object of a ``profile-grid`` model)."""
        return {
            "tp": self.tp,
            "ep": self.ep,
            "hidden": self.hidden,
            "dtype_bytes": self.dtype_bytes,
            "link": None if self.link is None else self.link.to_dict(),
            "link_evidence": self.link_evidence,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Parallelism:
        """:meth:`to_dict`'s form (``None``: one GPU); errors name ``where`` and the key.

        Raises
        ------
        FormatError
            For a value that is not an object, an unknown key, or a figure out of range.
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise FormatError(f"{where}: expected an object")
        check_keys(data, _KEYS, where)
        if "tp" not in data:
            raise FormatError(f"{where}: missing 'tp'")
        link = data.get("link")
        return cls(
            json_integer(data["tp"], f"{where}.tp", 1, MAX_TENSOR_PARALLEL),
            json_integer(data.get("hidden", 0), f"{where}.hidden", 0, MAX_HIDDEN),
            json_integer(data.get("dtype_bytes", 2), f"{where}.dtype_bytes", 1, 8),
            None if link is None else Link.from_dict(link, f"{where}.link"),
            json_integer(data.get("ep", 1), f"{where}.ep", 1, MAX_EXPERTS),
            text_field(data, "link_evidence", "", where),
        )
