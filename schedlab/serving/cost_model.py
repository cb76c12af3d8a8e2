"""Cost models: the duration of one engine iteration, and their monotonicity check.

A batch is described by ``n_decode`` decode requests holding ``decode_kv`` KV tokens in
total and a sequence of prefill chunks ``(c, p)``: ``c`` new prompt tokens on top of ``p``
tokens of the same request already in the cache (``docs/design.md``, "Cost models and
calibration"). A cost model maps a batch to seconds and must be non-decreasing in every
chunk length ``c``: SLOWeave's binary search depends on it, so :func:`require_monotone`
checks it on a grid instead of assuming.

JSON form (``save_cost_model`` / ``load_cost_model``)::

    {"kind": "linear-attention",        # selects the loader in the kind registry
     "name": "sloweave-default",        # free text
     "margin_s": 0.0,                   # one-sided margin delta for SLOWeave (seconds)
     "source": "...",                   # provenance, free text
     "hardware": "...",                 # the GPU it describes (optional, free text)
     "coefficients": {"base_s": 0.00035, ...}}   # kind-specific body

Unknown keys are refused by name (:func:`~schedlab.json_files.check_keys`). Any other kind
plugs in with a ``kind`` string and a loader ``loader(data: Mapping, where: str) ->
CostModel`` that validates ``data`` (raising :class:`~schedlab.errors.FormatError` naming
``where``, unknown keys included); the object's ``to_dict()`` must
return the same JSON form with that ``kind``. Two ways, never a module named in a string:
:func:`register_cost_model_kind` at run time, or a Python entry point in the group
:data:`KIND_ENTRY_POINTS` of an installed package — which is how
:mod:`schedlab.calibration` adds its ``profile-grid`` kind (``pyproject.toml``), so that
this module, below calibration, never imports it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from schedlab.arguments_check import check_int, check_type, check_types
from schedlab.errors import (
    FormatError,
    InputTypeError,
    NonMonotoneCostModelError,
    ServingError,
    UnknownNameError,
)
from schedlab.json_files import check_keys, read_json, text_field, write_text
from schedlab.registry import Registry

__all__ = [
    "BUILTIN_COST_MODELS",
    "COST_MODEL_KINDS",
    "KIND_ENTRY_POINTS",
    "SLOWEAVE_DEFAULT",
    "BatchShape",
    "Chunk",
    "CostModel",
    "CostModelLoader",
    "LinearAttentionCostModel",
    "batch_time",
    "check_monotone",
    "cost_model_from_dict",
    "cost_model_kinds",
    "cost_model_names",
    "get_cost_model",
    "hardware_of",
    "load_cost_model",
    "lockstep_time",
    "register_cost_model_kind",
    "require_monotone",
    "save_cost_model",
    "uses_decode_spread",
]

#: A prefill chunk: ``(new tokens c, prior context tokens p)`` of one request.
Chunk = tuple[int, int]


@dataclass(frozen=True, slots=True)
class BatchShape:
    """What a cost model needs of one iteration's batch.

    Attributes
    ----------
    n_decode, decode_kv
        Running decodes and the KV tokens they attend to in total.
    chunks
        Prefill chunks ``(c, p)``.
    decode_kv_max, decode_kv_min
        The longest and shortest decode's KV (``None``: not tracked).
    """

    n_decode: int
    decode_kv: int
    chunks: tuple[Chunk, ...]
    decode_kv_max: int | None = None
    decode_kv_min: int | None = None

    @property
    def tokens(self) -> int:
        """Tokens the batch computes: one per decode and every chunk's."""
        return self.n_decode + sum(c for c, _ in self.chunks)


@runtime_checkable
class CostModel(Protocol):
    """Maps a batch to the duration of the iteration that runs it, in seconds.

    Optional extensions (backward compatible):

    * a model whose attribute ``decode_spread`` is ``True`` also accepts the keywords
      ``decode_kv_max`` and ``decode_kv_min`` in :meth:`iteration_time`, the KV tokens of
      the batch's longest and shortest decode (``None`` or absent: unknown, treat the
      decodes as equal). The simulator passes them to such models only
      (:func:`uses_decode_spread`); every other caller may keep calling with three
      arguments. Uneven KV lengths make a real attention kernel slower than equal lengths
      with the same total (load imbalance).
    * a model with a method ``lockstep_time(shapes)`` times one step of data-parallel
      replicas that run in lockstep (:func:`lockstep_time`); without it, the step lasts as
      long as the slowest replica's batch alone.
    * a model with a method ``largest_safe_chunk(state, upper, budget_s)`` runs SLOWeave's
      binary search itself (a compiled model, in one call instead of one per probe):
      :func:`~schedlab.serving.sloweave.deadline_safe_chunk` hands it the state (which
      has decodes), the chunk's upper end :math:`U` and the budget with the margin taken
      off, and takes its ``(chunk, evaluations, deadline miss, predicted seconds)`` as
      the search's answer, which it must be, probe for probe, with the model's own
      ``iteration_time``;
    * a model with a method ``replay_prefill_s(job)`` replays a node's SLOWeave schedule
      itself (:func:`~schedlab.serving.prefill_replay.replay_end_s`), with the answer of
      :func:`~schedlab.serving.prefill_replay.sloweave_replay_s` on its own
      ``iteration_time``, probe for probe.
    """

    @property
    def name(self) -> str:
        """Human-readable name."""
        ...

    @property
    def margin_s(self) -> float:
        """One-sided margin ``delta >= 0`` (seconds) SLOWeave adds to a prediction."""
        ...

    def iteration_time(self, n_decode: int, decode_kv: int, chunks: Sequence[Chunk]) -> float:
        """Seconds for ``n_decode`` decodes holding ``decode_kv`` tokens plus ``chunks``."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The JSON form described in the module docstring."""
        ...


@dataclass(frozen=True)
class LinearAttentionCostModel:
    r"""Linear token costs plus attention terms, with named coefficients (seconds).

    For ``n`` decodes holding ``K`` KV tokens and chunks :math:`(c_j, p_j)`, with
    :math:`C = \sum_j c_j`,

    .. math::

        T = b + [n>0]\,(f_d + a_d n + k_d K)
              + [C>0]\,\bigl(f_p + a_p C + k_p \textstyle\sum_j c_j (p_j + \frac{c_j+1}{2})\bigr)

    where :math:`c_j (p_j + (c_j+1)/2)` counts the query-key pairs of causal attention of a
    chunk over its prior context and itself. The decode attention term reads every cached
    token once. With SLOWeave's coefficients and no attention terms this is the default
    model of the SLOWeave simulator (arXiv 2609.07883; ``docs/design.md``, "SLOWeave"), in ms:
    :math:`T(n,c) = 0.35 + [n>0](0.90 + 0.055 n) + [c>0](0.40 + 0.006 c)`.

    Coefficients may be negative (a least-squares fit can give that); whether the result
    is usable is decided by :func:`require_monotone`, not here.

    Attributes
    ----------
    base_s
        :math:`b`, paid by every iteration.
    decode_fixed_s, decode_per_seq_s, decode_per_kv_s
        :math:`f_d, a_d, k_d`.
    prefill_fixed_s, prefill_per_token_s, prefill_attention_s
        :math:`f_p, a_p, k_p` (the last per query-key pair).
    name, margin_s, source, hardware
        Name, SLOWeave margin :math:`\delta \ge 0`, provenance, and the GPU it describes
        (``""``: not stated).
    """

    name: str = "linear-attention"
    base_s: float = 0.0
    decode_fixed_s: float = 0.0
    decode_per_seq_s: float = 0.0
    decode_per_kv_s: float = 0.0
    prefill_fixed_s: float = 0.0
    prefill_per_token_s: float = 0.0
    prefill_attention_s: float = 0.0
    margin_s: float = 0.0
    source: str = ""
    hardware: str = ""

    def __post_init__(self) -> None:
        for field in (*COEFFICIENTS, "margin_s"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ServingError(f"cost model {self.name!r}: {field}: expected a number")
            if not math.isfinite(value):
                raise ServingError(f"cost model {self.name!r}: {field}: must be finite")
        if self.margin_s < 0:
            raise ServingError(
                f"cost model {self.name!r}: margin_s: must be >= 0 (one-sided), "
                f"got {self.margin_s}"
            )

    def iteration_time(self, n_decode: int, decode_kv: int, chunks: Sequence[Chunk]) -> float:
        """Seconds for the batch; see the class docstring."""
        seconds = self.base_s
        if n_decode > 0:
            seconds += (
                self.decode_fixed_s
                + self.decode_per_seq_s * n_decode
                + self.decode_per_kv_s * decode_kv
            )
        tokens = 0
        pairs = 0.0
        for c, prior in chunks:
            tokens += c
            pairs += c * (prior + (c + 1) / 2)
        if tokens > 0:
            seconds += (
                self.prefill_fixed_s
                + self.prefill_per_token_s * tokens
                + self.prefill_attention_s * pairs
            )
        return seconds

    def to_dict(self) -> dict[str, Any]:
        """JSON form: kind ``linear-attention`` and the coefficients by name."""
        values = asdict(self)
        return {
            "kind": "linear-attention",
            "name": self.name,
            "margin_s": self.margin_s,
            "source": self.source,
            "hardware": self.hardware,
            "coefficients": {key: values[key] for key in COEFFICIENTS},
        }


#: Coefficient names of :class:`LinearAttentionCostModel`, in JSON order.
COEFFICIENTS: tuple[str, ...] = tuple(
    f.name
    for f in fields(LinearAttentionCostModel)
    if f.name.endswith("_s") and f.name != "margin_s"
)

#: SLOWeave's default cost model (``docs/design.md``, "SLOWeave"; arXiv 2609.07883), in seconds.
SLOWEAVE_DEFAULT = LinearAttentionCostModel(
    name="sloweave-default",
    base_s=0.35e-3,
    decode_fixed_s=0.90e-3,
    decode_per_seq_s=0.055e-3,
    prefill_fixed_s=0.40e-3,
    prefill_per_token_s=0.006e-3,
    source="SLOWeave (arXiv 2609.07883), default simulator cost model; docs/design.md, SLOWeave",
    hardware="illustrative, no GPU",
)

#: Built-in models by name.
BUILTIN_COST_MODELS: dict[str, CostModel] = {SLOWEAVE_DEFAULT.name: SLOWEAVE_DEFAULT}


#: The keys of a ``linear-attention`` cost model's JSON form.
_LINEAR_KEYS = ("kind", "name", "margin_s", "source", "hardware", "coefficients")


def _load_linear_attention(data: Mapping[str, Any], where: str) -> CostModel:
    check_keys(data, _LINEAR_KEYS, where)  # a misspelt "margn_s" would run with margin 0
    body = data.get("coefficients")
    if not isinstance(body, Mapping):
        raise FormatError(f"{where}: coefficients: expected an object")
    unknown = sorted(set(body) - set(COEFFICIENTS))
    if unknown:
        raise FormatError(
            f"{where}: coefficients: unknown name(s) {', '.join(unknown)}; "
            f"known: {', '.join(COEFFICIENTS)}"
        )
    values: dict[str, float] = {}
    for key, value in body.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FormatError(f"{where}: coefficients.{key}: expected a number, got {value!r}")
        values[key] = float(value)
    margin = data.get("margin_s", 0.0)
    if isinstance(margin, bool) or not isinstance(margin, int | float):
        raise FormatError(f"{where}: margin_s: expected a number, got {margin!r}")
    try:
        return LinearAttentionCostModel(
            name=text_field(data, "name", "linear-attention", where),
            margin_s=float(margin),
            source=text_field(data, "source", "", where),
            hardware=text_field(data, "hardware", "", where),
            **values,
        )
    except ServingError as exc:
        raise FormatError(f"{where}: {exc}") from None


#: Entry-point group of installed cost-model kinds: ``kind = "module:loader"``.
KIND_ENTRY_POINTS = "schedlab.cost_model_kinds"

#: ``loader(data, where) -> CostModel``: builds a cost model from its JSON form.
CostModelLoader = Callable[[Mapping[str, Any], str], CostModel]

#: Every cost-model kind by its JSON ``kind``: the built-in one, those added by
#: :func:`register_cost_model_kind` and the installed ones
#: (:class:`~schedlab.registry.Registry`).
COST_MODEL_KINDS: Registry[CostModelLoader] = Registry(
    "cost model kind",
    Callable,
    KIND_ENTRY_POINTS,
    (("linear-attention", _load_linear_attention),),
)


def register_cost_model_kind(kind: str, loader: CostModelLoader) -> None:
    """Make :func:`cost_model_from_dict` understand JSON objects with ``"kind": kind``
    (``COST_MODEL_KINDS.register(kind, loader)``).

    Parameters
    ----------
    kind
        The ``kind`` string of the JSON form; must be new.
    loader
        ``loader(data, where) -> CostModel``; raises ``FormatError`` naming ``where``.

    Raises
    ------
    RegistrationError
        If the kind is empty or taken.
    InputTypeError
        For a kind that is no string or a loader that is not callable.
    """
    COST_MODEL_KINDS.register(kind, loader)


def cost_model_kinds() -> tuple[str, ...]:
    """Kinds :func:`cost_model_from_dict` understands: registered and installed ones."""
    return COST_MODEL_KINDS.names()


def cost_model_from_dict(data: Any, where: str = "cost model") -> CostModel:
    """Build a cost model from its JSON form, dispatching on ``data["kind"]``."""
    if not isinstance(data, Mapping):
        raise FormatError(f"{where}: expected a JSON object")
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise FormatError(f"{where}: kind: expected a string, got {kind!r}")
    return COST_MODEL_KINDS.get(kind)(data, where)


def load_cost_model(path: str | Path) -> CostModel:
    """Read a cost model from a JSON file (see the module docstring for the schema)."""
    return cost_model_from_dict(read_json(path, "cost-model file"), str(path))


def save_cost_model(model: CostModel, path: str | Path) -> None:
    """Write ``model.to_dict()`` as JSON to ``path`` (strict JSON: no ``NaN``; ``-``:
    standard output).

    Raises
    ------
    InputTypeError
        If ``model`` has no ``to_dict`` or ``path`` is no path.
    """
    check_types("save_cost_model", path=(path, (str, Path)))
    if not callable(getattr(model, "to_dict", None)):
        check_type(model, (CostModel,), "save_cost_model: model")  # names its type
        raise InputTypeError(f"save_cost_model: model: {type(model).__name__} has no to_dict()")
    text = json.dumps(model.to_dict(), indent=2, allow_nan=False)
    write_text(path, text + "\n", "cost-model file")


def shipped_cost_models() -> dict[str, Path]:
    """Fitted models shipped in ``schedlab/data/cost_models``, by file stem."""
    folder = Path(str(files("schedlab") / "data" / "cost_models"))
    return {p.stem: p for p in sorted(folder.glob("*.json"))}


def cost_model_names() -> tuple[str, ...]:
    """Names :func:`get_cost_model` knows: the built-in models, then the shipped ones."""
    return (*BUILTIN_COST_MODELS, *shipped_cost_models())


def get_cost_model(spec: str | CostModel) -> CostModel:
    """A built-in or shipped model by name, a model read from a ``.json`` path, or
    ``spec`` itself.

    A file is read once per process and version: while its resolved path, size and
    modification time stay the same, every call returns the same object (models are
    frozen), so a run that names its model in several places parses it once, and checks
    keyed on the model, such as monotonicity, run once.
    """
    if not isinstance(spec, str):
        return spec
    if spec in BUILTIN_COST_MODELS:
        return BUILTIN_COST_MODELS[spec]
    shipped = shipped_cost_models()
    if spec in shipped:
        return _read_once(shipped[spec])
    if spec.endswith(".json") or Path(spec).is_file():
        return _read_once(spec)
    raise UnknownNameError("cost model (or a .json path)", spec, cost_model_names())


#: Models read from files, by (resolved path, size, modification time in ns).
_FILE_MODELS: dict[tuple[str, int, int], CostModel] = {}

#: Most file versions :data:`_FILE_MODELS` keeps (the oldest read is dropped first).
_MOST_FILE_MODELS = 16


def _read_once(path: str | Path) -> CostModel:
    """:func:`load_cost_model` of ``path``, read once per version (:func:`get_cost_model`);
    errors name ``path`` as given."""
    try:
        stat = Path(path).stat()
        key = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
    except OSError:
        return load_cost_model(path)  # its own error, naming the path
    if key not in _FILE_MODELS:
        if len(_FILE_MODELS) >= _MOST_FILE_MODELS:
            del _FILE_MODELS[next(iter(_FILE_MODELS))]
        _FILE_MODELS[key] = load_cost_model(path)
    return _FILE_MODELS[key]


def hardware_of(model: CostModel) -> str:
    """The GPU ``model`` describes, for every table and plot title that shows its results
    (a model's optional attribute ``hardware``; ``"hardware not stated"`` without one)."""
    return str(getattr(model, "hardware", "") or "hardware not stated")


def uses_decode_spread(model: CostModel) -> bool:
    """Whether ``model.iteration_time`` accepts the keywords ``decode_kv_max`` and
    ``decode_kv_min`` (see :class:`CostModel`)."""
    return getattr(model, "decode_spread", False) is True


def batch_time(model: CostModel, shape: BatchShape) -> float:
    """``model``'s seconds for ``shape``, with its decodes' spread if the model uses it."""
    if uses_decode_spread(model) and shape.decode_kv_max is not None:
        return float(
            model.iteration_time(  # type: ignore[call-arg]
                shape.n_decode,
                shape.decode_kv,
                shape.chunks,
                decode_kv_max=shape.decode_kv_max,
                decode_kv_min=shape.decode_kv_min,
            )
        )
    return float(model.iteration_time(shape.n_decode, shape.decode_kv, shape.chunks))


def lockstep_time(model: CostModel, shapes: Sequence[BatchShape]) -> float:
    """Seconds of one lockstep step of replicas running ``shapes`` (see :class:`CostModel`):
    the model's own ``lockstep_time`` if it has one, else the slowest batch's time."""
    own = getattr(model, "lockstep_time", None)
    if callable(own):
        return float(own(shapes))
    return max(batch_time(model, shape) for shape in shapes)


def check_monotone(
    model: CostModel,
    *,
    c_max: int = 4096,
    n_decodes: Sequence[int] = (0, 1, 16, 128),
    priors: Sequence[int] = (0, 4096),
    other_chunks: Sequence[Sequence[Chunk]] = ((), ((512, 0),)),
    kv_per_decode: int = 1024,
    limit: int = 5,
) -> list[str]:
    """Find where ``model`` is not a positive, finite, non-decreasing function of chunk size.

    For every slice ``(n, prior, others)`` of the grid the chunk length ``c`` runs over
    *every* integer ``0..c_max`` (with ``decode_kv = n * kv_per_decode``), so on those
    slices the check is exhaustive: a model that passes gives SLOWeave's binary search
    exactly the answer of a linear scan there (proofs/sloweave.md).

    Returns
    -------
    list of str
        Up to ``limit`` descriptions of violations; empty when none was found.

    Raises
    ------
    InputTypeError, ServingError
        If ``model`` is no :class:`CostModel`, or a count is no integer in its range
        (``c_max`` at most :data:`MAX_CHECKED_CHUNK`: the check costs ``c_max`` calls a
        slice).
    """
    _check_monotone_arguments("check_monotone", model, c_max)
    for name, values in (("n_decodes", n_decodes), ("priors", priors)):
        for k, value in enumerate(check_type(values, (Sequence,), f"check_monotone: {name}")):
            check_int(
                value, f"check_monotone: {name}[{k}]", 0, MAX_CHECKED_CHUNK, error=ServingError
            )
    check_int(
        kv_per_decode, "check_monotone: kv_per_decode", 0, MAX_CHECKED_CHUNK, error=ServingError
    )
    check_int(limit, "check_monotone: limit", 1, error=ServingError)
    for k, chunks in enumerate(
        check_type(other_chunks, (list, tuple), "check_monotone: other_chunks")
    ):
        for j, chunk in enumerate(
            check_type(chunks, (list, tuple), f"check_monotone: other_chunks[{k}]")
        ):
            where = f"check_monotone: other_chunks[{k}][{j}]"
            if len(check_type(chunk, (list, tuple), where)) != 2:
                raise ServingError(f"{where}: expected (chunk, prior), got {chunk!r}")
            for value in chunk:
                check_int(value, where, 0, MAX_CHECKED_CHUNK, error=ServingError)
    problems: list[str] = []
    for n in n_decodes:
        kv = n * kv_per_decode
        for prior in priors:
            for others in other_chunks:
                previous = -math.inf
                for c in range(c_max + 1):
                    chunks = (*others, (c, prior)) if c > 0 else tuple(others)
                    t = model.iteration_time(n, kv, chunks)
                    place = f"n_decode={n}, decode_kv={kv}, others={list(others)}, prior={prior}"
                    if not (math.isfinite(t) and t > 0):
                        problems.append(f"{place}, c={c}: time {t!r} is not positive and finite")
                    elif t < previous:
                        problems.append(
                            f"{place}: T(c={c}) = {t:.6g} s < T(c={c - 1}) = {previous:.6g} s"
                        )
                    if len(problems) >= limit:
                        return problems
                    previous = t
    return problems


#: The largest chunk :func:`check_monotone` checks up to (it calls the model ``c_max + 1``
#: times a slice).
MAX_CHECKED_CHUNK = 2**20


def _check_monotone_arguments(entry: str, model: Any, c_max: Any) -> None:
    """The door checks of :func:`check_monotone` and :func:`require_monotone`."""
    check_type(model, (CostModel,), f"{entry}: model")
    check_int(c_max, f"{entry}: c_max", 0, MAX_CHECKED_CHUNK, error=ServingError)


def _assert_monotone(model: CostModel, c_max: int, user: str) -> None:
    problems = check_monotone(model, c_max=c_max)
    if problems:
        raise NonMonotoneCostModelError(
            f"{user}: cost model {model.name!r} is not monotone non-decreasing in the chunk "
            f"length, so binary search would be unsound: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
        )


def require_monotone(model: CostModel, *, c_max: int = 4096, user: str = "SLOWeave") -> None:
    """Raise :class:`NonMonotoneCostModelError` if :func:`check_monotone` finds a problem.

    The result is cached for hashable models (frozen dataclasses), so repeated policy
    construction in a capacity search checks a model once.

    Raises
    ------
    InputTypeError, ServingError
        As :func:`check_monotone` for ``model`` and ``c_max``.
    """
    _check_monotone_arguments("require_monotone", model, c_max)
    check_type(user, (str,), "require_monotone: user")
    if isinstance(model, Hashable):
        try:
            hash(model)
        except TypeError:  # e.g. a frozen dataclass holding a list
            pass
        else:
            _assert_monotone_cached(model, c_max, user)
            return
    _assert_monotone(model, c_max, user)


_assert_monotone_cached = lru_cache(maxsize=64)(_assert_monotone)
