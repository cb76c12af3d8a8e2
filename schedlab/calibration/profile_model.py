r"""The calibrated cost model: an iteration composed from per-op GPU profile fits.

For a batch of :math:`n` decodes holding :math:`K` KV tokens in total and prefill chunks
:math:`(c_j, p_j)` (``docs/design.md``, section "Cost models and calibration"), with
:math:`C = \sum_j c_j`, :math:`P = \sum_j p_j`, :math:`m` the number of chunks,
:math:`N = n + C` tokens and :math:`S = n + m` sequences, one GPU of a deployment with
tensor parallelism :math:`t` spends

.. math::

    T = \Bigl[\; \underbrace{\sum_{o \in \text{layer ops}} \tfrac{L}{L_0}\, w_o\, f_o(N)
        + \sum_{o \in \text{forward ops}} f_o(N)}_{\text{dense}(N)}
        + \underbrace{\sum_{o \in \text{head ops}} f_o(S)}_{\text{head}(S)}
        + \tfrac{L}{L_0}\, \bigl(A_s + B(N)\bigr) \Bigr] \cdot 10^{-6}\ \text{s}
        + 2 L \, T_{AR}(N h b, t) + H,

    A_s = A\bigl(C, P, n, \bar k\bigr)
          + \alpha \max\bigl(0,\; A(C, P, n, k_{\max}) - A(C, P, n, \bar k)\bigr),
    \qquad \bar k = K/n,

where :math:`f_o` are the :class:`~schedlab.calibration.curves.MonotoneCurve` fits of the
op measurements (µs) of the profile's ``tp<t>`` folder, :math:`w_o` how often op :math:`o`
runs per decoder layer (:mod:`schedlab.calibration.layouts`), :math:`L` the model's layer
count, :math:`L_0` the layers the profiler ran, :math:`A` the
:class:`~schedlab.calibration.attention_grid.AttentionGrid`, :math:`B` the mixture-of-experts
block (:class:`~schedlab.calibration.experts.ExpertTable`; 0 for dense models) and
:math:`T_{AR}` the tensor-parallel all-reduce of the :class:`~schedlab.llm.interconnect.Link`
between the GPUs of one engine as vLLM runs it
(:meth:`~schedlab.llm.interconnect.Link.tensor_all_reduce_s`), over :math:`N h b` bytes
(hidden size :math:`h`, :math:`b` bytes per element), twice per layer (after ``o_proj`` and
after the MLP or expert block; 0 for :math:`t = 1` or without a link), and :math:`H` the
host's time of one step (``host_s``).

Scaling to the real model (``proofs/profile_scaling.md``): the profiler runs one decoder
layer (:math:`L_0 = 1`) of a model whose sharded widths (intermediate size, attention and
KV heads, vocabulary) are the real ones divided by :math:`t`, on one GPU, so a row of
``tp<t>`` is the time of one real layer's op on one rank of a TP-:math:`t` deployment;
decoder layers are identical, so a forward pass runs each per-layer op :math:`L` times.
No width is rescaled here. (``meta.yaml``'s ``hf_overrides`` records the last TP degree
the profiler ran, so its widths need not be those of the ``tp1`` rows.)

Modelling choices (each one documented, none fitted to a serving run):

* *Several chunks in one batch* are looked up as one chunk of :math:`C` tokens on
  :math:`P` cached tokens, as LLMServingSim does. The query-key work
  :math:`C (P + C/2)` is at least :math:`\sum_j c_j (p_j + c_j/2)`, so this over-estimates
  attention when chunks are split (a safe direction for SLOWeave).
* *Decode attention* is looked up at the mean KV per decode, :math:`\bar k = K/n`: the
  profile measures batches of :math:`n` decodes holding *equal* KV, and a uniform batch at
  the mean reads the same :math:`K` tokens (decode attention is memory-bound).
* *Skew of decode KV lengths* (:math:`\alpha` term): uneven KV makes the kernel slower than
  the uniform batch at the mean; :math:`\alpha` comes from the profiler's per-bucket fit
  (:class:`~schedlab.calibration.skew.SkewTable`), looked up with the batch's shortest and
  longest decode. The simulator passes them through the optional ``decode_kv_max`` and
  ``decode_kv_min`` keywords (:class:`~schedlab.serving.cost_model.CostModel`); callers
  that do not (SLOWeave's chunk search) get the uniform value.
* *Experts*: the expected number of distinct experts a batch of :math:`N` tokens activates
  under top-:math:`k` routing, :math:`E(1-(1-k/E)^N)`
  (:mod:`schedlab.calibration.experts`).
* *Logits* are computed for every scheduled sequence, partial prefills included (vLLM v1
  computes logits at each request's last scheduled position), hence :math:`S = n + m`.
* Host-side work (scheduling, input preparation, sampling's host side) is not in a kernel
  profile: :math:`H` is 0 unless a machine file gives it
  (:mod:`schedlab.calibration.machine_file`, :meth:`ProfileCostModel.deployed`).

:math:`T` is non-decreasing in every chunk length (``proofs/calibrated_monotone.md``).
Installed as cost-model kind ``profile-grid`` (the entry point
``schedlab.cost_model_kinds`` of ``pyproject.toml``; see
:mod:`schedlab.serving.cost_model`), so the simulator and SLOWeave load its JSON like any
other model.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from schedlab.calibration.attention_grid import AttentionGrid
from schedlab.calibration.curves import MonotoneCurve
from schedlab.calibration.experts import ExpertTable
from schedlab.calibration.parallelism import Parallelism
from schedlab.calibration.profiles import SourceFile
from schedlab.calibration.skew import SkewTable
from schedlab.errors import FormatError, InputTypeError
from schedlab.json_files import check_keys, json_number, text_field
from schedlab.llm.gpu_deployment import GpuDeployment
from schedlab.llm.link_evidence import EVIDENCE_KINDS, LinkEvidence
from schedlab.serving.cost_model import BatchShape, Chunk
from schedlab.serving.prefill_replay import PrefillReplay
from schedlab.serving.sloweave import SLOWeaveState

__all__ = ["KIND", "MAX_HOST_S", "ProfileCostModel", "load_profile_cost_model"]

#: The ``kind`` of the JSON form.
KIND = "profile-grid"


@dataclass(frozen=True, eq=False)
class ProfileCostModel:
    """Iteration time composed from profile fits (module docstring).

    Attributes
    ----------
    name
        Model name, e.g. ``rtxpro6000_llama-3.1-8b``.
    model
        The served model as the profile spells it.
    layers, profiled_layers
        :math:`L` and :math:`L_0`.
    layer_ops
        ``(op, runs per layer, curve over tokens)``.
    forward_ops
        ``(op, curve over tokens)`` run once per forward pass (embedding, final norm).
    head_ops
        ``(op, curve over sequences)`` (lm_head, sampler).
    attention
        One layer's attention.
    skew
        The decode-skew table (``None``: no correction).
    experts
        One layer's expert block (``None``: a dense model).
    parallelism
        Tensor parallelism and its link.
    margin_s
        SLOWeave margin :math:`\\delta \\ge 0`.
    hardware
        The GPU the profile was measured on (``meta.yaml``'s ``hardware``).
    source, license
        Provenance and license of the data the figures derive from.
    sources
        Files fitted on, with SHA-256 hashes.
    report
        Summary of the calibration error report (free-form JSON object).
    deployment
        The GPUs the profile describes, which size the KV cache of an engine simulated
        on this model (``None``: not known; JSON files without it load so).
    host_s
        :math:`H`, the host's time of one step in seconds (0: not modelled).
    """

    name: str
    model: str
    layers: int
    profiled_layers: int
    layer_ops: tuple[tuple[str, float, MonotoneCurve], ...]
    forward_ops: tuple[tuple[str, MonotoneCurve], ...]
    head_ops: tuple[tuple[str, MonotoneCurve], ...]
    attention: AttentionGrid
    skew: SkewTable | None = None
    experts: ExpertTable | None = None
    parallelism: Parallelism = field(default_factory=Parallelism)
    margin_s: float = 0.0
    hardware: str = ""
    source: str = ""
    license: str = ""
    sources: tuple[SourceFile, ...] = ()
    report: Mapping[str, Any] = field(default_factory=dict)
    deployment: GpuDeployment | None = None
    host_s: float = 0.0

    def __post_init__(self) -> None:
        par = self.parallelism
        if par.link_evidence not in ("", *EVIDENCE_KINDS) or (
            par.link is None and par.link_evidence
        ):
            raise ValueError(
                f"cost model {self.name!r}: parallelism.link_evidence "
                f"{par.link_evidence!r}: one of {', '.join(EVIDENCE_KINDS)} for a link, "
                "'' when not recorded or without one"
            )
        if not 0 <= self.host_s <= MAX_HOST_S:
            raise ValueError(
                f"cost model {self.name!r}: host_s must be from 0 to {MAX_HOST_S:g} s "
                f"(MAX_HOST_S), got {self.host_s!r}"
            )
        if self.layers < 1 or self.profiled_layers < 1:
            raise ValueError(f"cost model {self.name!r}: layer counts must be >= 1")
        if not self.margin_s >= 0:
            raise ValueError(f"cost model {self.name!r}: margin_s must be >= 0")
        if not self.layer_ops or not self.head_ops:
            raise ValueError(f"cost model {self.name!r}: needs layer ops and head ops")
        if any(count < 0 for _, count, _ in self.layer_ops):
            raise ValueError(f"cost model {self.name!r}: op counts must be >= 0")
        scale = self.layers / self.profiled_layers
        dense = MonotoneCurve.combine(
            [(scale * count, curve) for _, count, curve in self.layer_ops]
            + [(1.0, curve) for _, curve in self.forward_ops]
        )
        head = MonotoneCurve.combine([(1.0, curve) for _, curve in self.head_ops])
        object.__setattr__(self, "_dense", dense)
        object.__setattr__(self, "_head", head)
        object.__setattr__(self, "_scale", scale)

    @property
    def decode_spread(self) -> bool:
        """Whether :meth:`iteration_time` uses ``decode_kv_max`` (a skew correction)."""
        return self.skew is not None

    @property
    def dense_curve(self) -> MonotoneCurve:
        """:math:`\\text{dense}(N)` in µs."""
        return self._dense  # type: ignore[attr-defined]

    @property
    def head_curve(self) -> MonotoneCurve:
        """:math:`\\text{head}(S)` in µs."""
        return self._head  # type: ignore[attr-defined]

    def deployed(
        self,
        *,
        link: LinkEvidence | None = None,
        ep: int | None = None,
        host_s: float | None = None,
    ) -> ProfileCostModel:
        """The same model with ``link`` between the GPUs (recorded with its evidence's
        kind), experts spread over ``ep`` GPUs and ``host_s`` of host time a step, each
        ``None`` for its own (:func:`schedlab.calibration.machine_file.machine_terms`
        chooses them)."""
        par = self.parallelism
        if link is not None:
            par = dataclasses.replace(par, link=link.link, link_evidence=link.kind)
        return dataclasses.replace(
            self,
            parallelism=dataclasses.replace(par, ep=par.ep if ep is None else ep),
            host_s=self.host_s if host_s is None else host_s,
        )

    def _attention_us(self, shape: BatchShape) -> float:
        """One layer's attention (µs) for a batch, with the skew correction."""
        n, tokens = shape.n_decode, 0
        context = 0
        for c, prior in shape.chunks:
            if c > 0:
                tokens += c
                context += prior
        kv = shape.decode_kv / n if n > 0 else 0.0
        attention = self.attention(tokens, context, n, kv)
        longest = shape.decode_kv_max
        if self.skew is not None and longest is not None and n > 1 and longest > kv:
            top = self.attention(tokens, context, n, longest)
            if top > attention:
                least = shape.decode_kv_min if shape.decode_kv_min is not None else longest
                alpha = self.skew.alpha(tokens, context, n, kv, least, longest)
                attention += alpha * (top - attention)
        return attention

    def _experts_us(self, tokens: int) -> float:
        """One layer's expert block (µs) for ``tokens`` tokens on one GPU (module docs):
        whole experts spread over ``ep`` GPUs, or each split over the ``tp`` GPUs."""
        if self.experts is None:
            return 0.0
        par = self.parallelism
        if par.ep > 1:
            return self.experts(tokens, par.ep)
        return self.experts(tokens) / par.tp

    def lockstep_time(self, shapes: Sequence[BatchShape]) -> float:
        """Seconds of one step of ``len(shapes)`` data-parallel replicas in lockstep.

        Every replica's forward pass is padded to the most tokens any of them has
        (vLLM ``vllm/v1/worker/dp_utils.py``, ``coordinate_batch_across_dp``, lines
        165–229), so dense ops and the expert block see :math:`N_{pad}` tokens; the expert
        block of a layer runs on every replica's tokens, :math:`d N_{pad}`, gathered
        before it with their router logits and scattered back after it (vLLM's default
        all-to-all, ``allgather_reducescatter``, ``vllm/config/parallel.py`` line 160: for
        a bf16 model ``dispatch_router_logits`` all-gathers :math:`d N_{pad} (h + E) b`
        bytes, ``vllm/distributed/device_communicators/all2all.py`` lines 159–191, and
        ``combine`` reduce-scatters :math:`d N_{pad} h b`, lines 233–246; :math:`E`
        experts) over the ``d`` replicas' link. Attention and the head ops are each
        replica's own; the step lasts as long as the slowest replica, and the host's
        :math:`H` once.
        """
        dp = len(shapes)
        pad = max(shape.tokens for shape in shapes)
        slowest = max(
            self._head(shape.n_decode + sum(1 for c, _ in shape.chunks if c > 0))  # type: ignore[attr-defined]
            + self._scale * self._attention_us(shape)  # type: ignore[attr-defined]
            for shape in shapes
        )
        shared = self._dense(pad) + self._scale * self._experts_us(dp * pad)  # type: ignore[attr-defined]
        par = self.parallelism
        seconds = (slowest + shared) * 1e-6 + par.collectives_s(pad, self.layers) + self.host_s
        if self.experts is not None and par.link is not None and dp > 1:
            size = dp * pad * par.dtype_bytes
            gather = par.link.all_gather_s(size * (par.hidden + self.experts.experts), dp)
            scatter = par.link.all_gather_s(size * par.hidden, dp)
            seconds += self.layers * (gather + scatter)
        return seconds

    def reference_time(
        self,
        n_decode: int,
        decode_kv: int,
        chunks: Sequence[Chunk],
        *,
        decode_kv_max: int | None = None,
        decode_kv_min: int | None = None,
    ) -> float:
        """Seconds for the batch (module docstring), in Python: the reference
        :meth:`iteration_time`'s compiled form is checked against."""
        shape = BatchShape(n_decode, decode_kv, tuple(chunks), decode_kv_max, decode_kv_min)
        batch = shape.tokens
        sequences = n_decode + sum(1 for c, _ in chunks if c > 0)
        layer = self._attention_us(shape) + self._experts_us(batch)
        micro = (
            self._dense(batch)  # type: ignore[attr-defined]
            + self._head(sequences)  # type: ignore[attr-defined]
            + self._scale * layer  # type: ignore[attr-defined]
        )
        return micro * 1e-6 + self.parallelism.collectives_s(batch, self.layers) + self.host_s

    def __getstate__(self) -> dict[str, Any]:
        """Its fields for pickling, without the compiled kernels and packed tables (a
        copy packs its own on first use)."""
        state = dict(self.__dict__)
        state.pop("_kernels", None)
        return state

    def _compiled(self) -> tuple[Any, Any, Any, Any, Any]:
        """The kernels of :mod:`schedlab.calibration.compiled_cost_model` and this model's
        tables, packed on first use (which loads numba): ``(iteration_seconds,
        largest_safe_chunk, replay_prefill_end, floats, ints)``."""
        compiled = self.__dict__.get("_kernels")
        if compiled is None:
            from schedlab.calibration import compiled_cost_model as kernels

            compiled = (
                kernels.iteration_seconds,
                kernels.largest_safe_chunk,
                kernels.replay_prefill_end,
                *kernels.pack(self),
            )
            object.__setattr__(self, "_kernels", compiled)
        return compiled

    def iteration_time(
        self,
        n_decode: int,
        decode_kv: int,
        chunks: Sequence[Chunk],
        *,
        decode_kv_max: int | None = None,
        decode_kv_min: int | None = None,
    ) -> float:
        """Seconds for the batch (module docstring), compiled: :meth:`reference_time` to
        rounding (:mod:`schedlab.calibration.compiled_cost_model`); ``decode_kv_max``
        and ``decode_kv_min`` are the longest and shortest decode's KV (``None``:
        decodes taken as equal, no skew correction)."""
        seconds, _, _, floats, ints = self.__dict__.get("_kernels") or self._compiled()
        given = (n_decode, decode_kv, chunks, decode_kv_max, decode_kv_min)
        try:
            return seconds(floats, ints, _sums(*given))
        except (TypeError, ValueError):  # not plain numbers: as floats, or a clear error
            return seconds(floats, ints, _sums(*_as_floats(given, self.name)))

    def largest_safe_chunk(self, state: SLOWeaveState, upper: int, budget_s: float) -> SafeChunk:
        """SLOWeave's search of :func:`~schedlab.serving.sloweave.deadline_safe_chunk`
        for ``state`` (which has decodes), chunks up to ``upper`` and a budget of
        ``budget_s`` seconds (margin taken off), compiled in one call: the search's
        ``(chunk, evaluations, deadline miss, predicted seconds)`` with
        :meth:`iteration_time`'s probes."""
        _, search, _, floats, ints = self.__dict__.get("_kernels") or self._compiled()
        batch = _sums(
            state.n_decode,
            state.decode_kv,
            state.fixed_chunks,
            state.decode_kv_max,
            state.decode_kv_min,
        )
        return search(floats, ints, batch, state.prior, budget_s, upper)

    def replay_prefill_s(self, job: PrefillReplay) -> float:
        """:func:`~schedlab.serving.prefill_replay.sloweave_replay_s` of ``job`` with this
        model, compiled in one call: the same end, probe for probe."""
        _, _, replay, floats, ints = self.__dict__.get("_kernels") or self._compiled()
        d = job.decodes
        counts = (
            d.n_decode,
            d.decode_kv,
            -1 if d.decode_kv_max is None else d.decode_kv_max,
            -1 if d.decode_kv_min is None else d.decode_kv_min,
            job.token_budget,
            job.chunk_cap,
        )
        queue = _matrix(job.queue, 2)
        releases = _matrix(job.releases, 3)
        times = (job.start_s, job.tpot_s, job.margin_s, job.since_s, job.beat_s)
        return replay(floats, ints, counts, queue, releases, times)

    def to_dict(self) -> dict[str, Any]:
        """JSON form, kind ``profile-grid``."""
        return {
            "kind": KIND,
            "name": self.name,
            "margin_s": self.margin_s,
            "source": self.source,
            "license": self.license,
            "model": {
                "name": self.model,
                "layers": self.layers,
                "profiled_layers": self.profiled_layers,
            },
            "sources": [{"file": s.name, "sha256": s.sha256} for s in self.sources],
            "ops": {
                "per_layer": {
                    op: {"runs_per_layer": count, "time_us_vs_tokens": curve.to_dict()}
                    for op, count, curve in self.layer_ops
                },
                "per_forward": {
                    op: {"time_us_vs_tokens": curve.to_dict()} for op, curve in self.forward_ops
                },
                "per_sequence": {
                    op: {"time_us_vs_sequences": curve.to_dict()} for op, curve in self.head_ops
                },
            },
            "attention": self.attention.to_dict(),
            "skew": None if self.skew is None else self.skew.to_dict(),
            "experts": None if self.experts is None else self.experts.to_dict(),
            "parallelism": self.parallelism.to_dict(),
            "hardware": self.hardware,
            "report": dict(self.report),
            "deployment": None if self.deployment is None else self.deployment.to_dict(),
            "host_s": self.host_s,
        }


#: :meth:`ProfileCostModel.largest_safe_chunk`'s answer: the chunk, the evaluations, whether
#: even the decodes alone miss the budget, and the predicted seconds.
SafeChunk = tuple[int, int, bool, float]


def _matrix(rows: Sequence[tuple[int, ...]], width: int) -> Any:
    """``rows`` of ``width`` integers as a C-ordered ``int64`` matrix (writable)."""
    flat = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=width * len(rows))
    return flat.reshape(-1, width)


def _as_floats(given: tuple[Any, ...], name: str) -> tuple[Any, ...]:
    """:meth:`ProfileCostModel.iteration_time`'s arguments ``given`` with every number a
    float, for the compiled model; a value that is no real number is refused."""

    def real(value: Any, what: str) -> float:
        if value is None and what.startswith("decode_kv_m"):
            return -1.0  # not known
        if not isinstance(value, numbers.Real):
            raise InputTypeError(
                f"cost model {name!r}: iteration_time: {what}: expected a number, got "
                f"{value!r:.60}"
            )
        return float(value)

    n_decode, decode_kv, chunks, decode_kv_max, decode_kv_min = given
    if not isinstance(chunks, Sequence):
        raise InputTypeError(
            f"cost model {name!r}: iteration_time: chunks: expected a sequence of "
            f"(tokens, prior), got {chunks!r:.60}"
        )
    pairs = []
    for k, chunk in enumerate(chunks):
        if not isinstance(chunk, tuple | list) or len(chunk) != 2:
            raise InputTypeError(
                f"cost model {name!r}: iteration_time: chunks[{k}]: expected (tokens, prior), "
                f"got {chunk!r:.60}"
            )
        pairs.append((real(chunk[0], f"chunks[{k}]"), real(chunk[1], f"chunks[{k}]")))
    return (
        real(n_decode, "n_decode"),
        real(decode_kv, "decode_kv"),
        pairs,
        real(decode_kv_max, "decode_kv_max"),
        real(decode_kv_min, "decode_kv_min"),
    )


def _sums(
    n_decode: int,
    decode_kv: int,
    chunks: Sequence[Chunk],
    decode_kv_max: int | None,
    decode_kv_min: int | None,
) -> tuple[float, ...]:
    """A batch as the sums the compiled model reads
    (:data:`~schedlab.calibration.compiled_cost_model.BATCH`; -1: a KV not known)."""
    tokens = context = counted = 0
    for c, prior in chunks:
        tokens += c
        if c > 0:
            context += prior
            counted += 1
    return (
        n_decode,
        decode_kv,
        tokens,
        context,
        counted,
        -1 if decode_kv_max is None else decode_kv_max,
        -1 if decode_kv_min is None else decode_kv_min,
    )


def _get(data: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise FormatError(f"{where}: missing {key!r}")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise FormatError(f"{where}: {key}: unexpected value {str(value)[:60]!r}")
    return value


def _report(data: Any, where: str) -> dict[str, float | None]:
    """The fit's report figures: an object of finite numbers or ``null`` (not fitted)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise FormatError(f"{where}: expected an object")
    return {
        str(key): None if value is None else json_number(value, f"{where}.{key}")
        for key, value in data.items()
    }


def _sources(data: Any, where: str) -> tuple[SourceFile, ...]:
    """The files the model was fitted from: ``[{"file": ..., "sha256": ...}, ...]``."""
    if not isinstance(data, list):
        raise FormatError(f"{where}: expected a list")
    return tuple(
        SourceFile(
            text_field(item, "file", "", f"{where}[{k}]"),
            text_field(item, "sha256", "", f"{where}[{k}]"),
        )
        for k, item in enumerate(data)
    )


#: The most host time of one step (seconds) a model takes: vLLM's host work of a step
#: (scheduling, input preparation) is milliseconds; a second is a unit slip.
MAX_HOST_S = 1.0

#: The keys of a ``profile-grid`` cost model's JSON form, and of its ``model`` and
#: ``parallelism`` objects.
_KEYS = (
    "kind",
    "name",
    "margin_s",
    "source",
    "license",
    "model",
    "sources",
    "ops",
    "attention",
    "skew",
    "experts",
    "parallelism",
    "hardware",
    "report",
    "deployment",
    "host_s",
)
_MODEL_KEYS = ("name", "layers", "profiled_layers")


def load_profile_cost_model(data: Mapping[str, Any], where: str) -> ProfileCostModel:
    """Loader of kind ``profile-grid`` (validates, unknown keys refused by name; errors
    name ``where``)."""
    check_keys(data, _KEYS, where)  # a misspelt "margn_s" is named, not ignored
    model = _get(data, "model", where, Mapping)
    check_keys(model, _MODEL_KEYS, f"{where}: model")
    ops = _get(data, "ops", where, Mapping)
    try:
        layer_ops = tuple(
            (
                op,
                json_number(
                    body.get("runs_per_layer"), f"{where}: ops.per_layer.{op}.runs_per_layer"
                ),
                MonotoneCurve.from_dict(
                    body.get("time_us_vs_tokens"), f"{where}: ops.per_layer.{op}.time_us_vs_tokens"
                ),
            )
            for op, body in _get(ops, "per_layer", f"{where}: ops", Mapping).items()
        )
        forward_ops = tuple(
            (
                op,
                MonotoneCurve.from_dict(
                    body.get("time_us_vs_tokens"),
                    f"{where}: ops.per_forward.{op}.time_us_vs_tokens",
                ),
            )
            for op, body in _get(ops, "per_forward", f"{where}: ops", Mapping).items()
        )
        head_ops = tuple(
            (
                op,
                MonotoneCurve.from_dict(
                    body.get("time_us_vs_sequences"),
                    f"{where}: ops.per_sequence.{op}.time_us_vs_sequences",
                ),
            )
            for op, body in _get(ops, "per_sequence", f"{where}: ops", Mapping).items()
        )
        sources = _sources(data.get("sources", []), f"{where}: sources")
        skew, experts, hosted = data.get("skew"), data.get("experts"), data.get("deployment")
        expert_table = (
            None if experts is None else ExpertTable.from_dict(experts, f"{where}: experts")
        )
        return ProfileCostModel(
            name=text_field(data, "name", KIND, where),
            model=str(_get(model, "name", f"{where}: model", str)),
            layers=_get(model, "layers", f"{where}: model", int),
            profiled_layers=_get(model, "profiled_layers", f"{where}: model", int),
            layer_ops=layer_ops,
            forward_ops=forward_ops,
            head_ops=head_ops,
            attention=AttentionGrid.from_dict(data.get("attention"), f"{where}: attention"),
            skew=None if skew is None else SkewTable.from_dict(skew, f"{where}: skew"),
            experts=expert_table,
            parallelism=Parallelism.from_dict(data.get("parallelism"), f"{where}: parallelism"),
            margin_s=json_number(data.get("margin_s"), f"{where}: margin_s"),
            hardware=text_field(data, "hardware", "", where),
            source=text_field(data, "source", "", where),
            license=text_field(data, "license", "", where),
            sources=sources,
            report=_report(data.get("report"), f"{where}: report"),
            deployment=(
                None if hosted is None else GpuDeployment.from_dict(hosted, f"{where}: deployment")
            ),
            host_s=json_number(data.get("host_s", 0.0), f"{where}: host_s"),
        )
    except FormatError:  # names its place already
        raise
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"{where}: {exc}") from None
