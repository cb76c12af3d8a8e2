r"""Predicted output lengths: an interval per request, from a seeded prediction model.

An online scheduler sees a request's prompt at its arrival but not its output length
:math:`o_i`; at best it is told an interval :math:`[\ell_i, u_i]` (Chen, Ye, Zhou,
"Adaptively Robust LLM Inference Optimization under Prediction Uncertainty",
arXiv 2508.14544) or a point :math:`\hat o_i = \ell_i = u_i`. :func:`predict` draws
:class:`Intervals` for the true lengths by one of these models, named by a *spec*:

=============================  =============================================================
spec                           model
=============================  =============================================================
``perfect``                    :math:`\ell_i = u_i = o_i` (exact).
``interval:ALPHA[:SEED]``      intervals of ratio :math:`\ell_i / u_i \approx \alpha`,
                               :math:`0 < \alpha \le 1`, that contain :math:`o_i` (exact):
                               :func:`ratio_intervals`.
``buckets[:SEED]``,            the output-length class a classifier names, right with
``buckets:ACCURACY:SEED``      probability ``ACCURACY`` (default :data:`BUCKET_ACCURACY`),
                               else a neighbouring class; may miss :math:`o_i` (not exact
                               unless ``ACCURACY`` is 1): :func:`bucket_intervals`.
``lognormal:CV[:SEED]``        a point :math:`\max(1, \mathrm{round}(o_i X))` with a mean-1
                               lognormal :math:`X` of coefficient of variation ``CV``
                               (exact only for ``CV = 0``): :func:`lognormal_points`.
=============================  =============================================================

Every model is seeded: the seed written in the spec wins over :func:`predict`'s ``seed``
argument, and each model draws from its own random stream of that seed, so the same
spec, lengths and seed give the same intervals. A file of predictions, one interval per
request id, is read by :func:`read_predictions`. Bad specs and predictions raise a
one-line :class:`~schedlab.errors.PredictionError` naming the place.

Every public function checks its arguments at the door
(:mod:`schedlab.arguments_check`): a wrong type raises
:class:`~schedlab.errors.InputTypeError`, a length, ratio or seed out of its domain (a
seed is an integer in ``[0, MAX_SEED]``, in the spec or not) a
:class:`~schedlab.errors.PredictionError`.

The models are a :class:`~schedlab.registry.Registry`, :data:`PREDICTION_MODELS`: a
:class:`PredictionModel` registered there (or installed in the entry-point group
:data:`ENTRY_POINTS`) is a spec like the built-in ones.

This module imports nothing of schedlab but the ground (:mod:`schedlab.errors`,
:mod:`schedlab.arguments_check`, :mod:`schedlab.json_files`, :mod:`schedlab.registry`):
both the offline half and the serving simulator use it.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from schedlab.arguments_check import (
    MAX_SEED,
    check_int_array,
    check_real,
    check_seed,
    check_type,
)
from schedlab.errors import FormatError, InputTypeError, PredictionError
from schedlab.json_files import check_keys, parse_json, read_text
from schedlab.registry import Registry

#: Largest predicted length accepted or made, ``2**40``: the bound every token count of an
#: instance obeys (:data:`schedlab.offline.instance.MAX_VALUE`), far beyond any output.
MAX_LENGTH = 2**40

__all__ = [
    "BUCKET_ACCURACY",
    "ENTRY_POINTS",
    "MAX_CV",
    "MAX_LENGTH",
    "PREDICTION_MODELS",
    "Intervals",
    "PredictionModel",
    "bucket_intervals",
    "geometric_mean",
    "lognormal_points",
    "predict",
    "ratio_intervals",
    "read_predictions",
]

# Largest end of an interval in size: a class of ``buckets`` may end above MAX_LENGTH
# (2**41 - 1 for a length near 2**40), and a View hides an end as -1.
_ENDS = 2**62

#: The classifier's accuracy of ``buckets`` when the spec does not give it: our choice
#: (the paper's classifier is not available to us), a middling classifier.
BUCKET_ACCURACY = 0.8

#: The largest coefficient of variation of ``lognormal`` (as the serving simulator's).
MAX_CV = 10.0

# Tags of each model's random stream, so that the streams of one seed are independent;
# ``lognormal``'s is the serving simulator's (schedlab/serving/prediction.py), so that
# both draw the same points for the same lengths, CV and seed.
_STREAMS = {"interval": 0x696E74, "buckets": 0x62636B, "lognormal": 0x707265}


@dataclass(frozen=True, eq=False)
class Intervals:
    """One predicted interval ``[lower[i], upper[i]]`` of output lengths per request.

    Attributes
    ----------
    lower, upper
        ``int64`` arrays, one entry per request (read-only).
    model
        The spec that produced them, with its seed (``"interval:0.5:3"``), or the file
        they were read from.
    exact
        Whether the model promises that every interval contains the true length.

    Raises
    ------
    InputTypeError, PredictionError
        For ends that are not sequences of integers up to ``2**62`` in size, a
        ``model`` that is no string, an ``exact`` that is no ``bool``, or not as many
        lower ends as upper ends (the ends are checked against the true lengths by
        :meth:`check`).
    """

    lower: np.ndarray
    upper: np.ndarray
    model: str
    exact: bool

    def __post_init__(self) -> None:
        check_type(self.model, (str,), "intervals.model")
        check_type(self.exact, (bool,), "intervals.exact")
        for name in ("lower", "upper"):
            where = f"intervals.{name}"
            array = check_int_array(
                getattr(self, name), where, -_ENDS, _ENDS, error=PredictionError
            )
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        if self.lower.shape != self.upper.shape:
            raise PredictionError(
                f"intervals: {self.lower.size} lower ends for {self.upper.size} upper ends"
            )

    def __len__(self) -> int:
        return len(self.lower)

    def check(self, outputs: np.ndarray | Sequence[int], where: str) -> None:
        """Refuse intervals that do not fit the true lengths ``outputs``.

        Raises
        ------
        PredictionError
            One line starting with ``where``, naming the first faulty request: a count
            other than one interval per request, ``lower < 1``, ``lower > upper``, or,
            when :attr:`exact`, a true length outside its interval.
        """
        true = np.asarray(outputs, dtype=np.int64)
        if self.lower.shape != true.shape or self.upper.shape != true.shape:
            raise PredictionError(
                f"{where}: {len(self.lower)} predictions for {len(true)} requests"
            )
        for wrong, what in (
            (self.lower < 1, "lower end below 1"),
            (self.lower > self.upper, "lower end above the upper end"),
        ):
            if wrong.any():
                i = int(np.argmax(wrong))
                raise PredictionError(
                    f"{where}: request {i}: interval [{self.lower[i]}, {self.upper[i]}] has "
                    f"its {what}"
                )
        if self.exact:
            outside = (true < self.lower) | (true > self.upper)
            if outside.any():
                i = int(np.argmax(outside))
                raise PredictionError(
                    f"{where}: request {i}: interval [{self.lower[i]}, {self.upper[i]}] "
                    f"excludes the true length {true[i]}, though {self.model} is declared exact"
                )

    def point(self) -> np.ndarray:
        """A point estimate per request: :func:`geometric_mean` of the ends."""
        return geometric_mean(self.lower, self.upper)


def geometric_mean(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    r"""The point estimate :math:`\mathrm{round}(\sqrt{\ell_i u_i})` of each interval,
    clipped to it: off from any length in the interval by a factor
    :math:`\sqrt{u_i/\ell_i}` at most, whichever end the length is at (the arithmetic
    mean can be off by :math:`(u_i/\ell_i + 1)/2`).

    Raises
    ------
    InputTypeError
        For ends that are not sequences of integers.
    PredictionError
        For ends of different lengths, below 1 or above ``2**62``, or a lower end above
        its upper end.
    """
    where = "geometric_mean: "
    lower = check_int_array(lower, where + "lower", 1, _ENDS, error=PredictionError)
    upper = check_int_array(upper, where + "upper", 1, _ENDS, error=PredictionError)
    if lower.shape != upper.shape:
        raise PredictionError(f"{where}{lower.size} lower ends for {upper.size} upper ends")
    if (lower > upper).any():
        i = int(np.argmax(lower > upper))
        raise PredictionError(f"{where}interval {i}: lower end {lower[i]} above {upper[i]}")
    middle = np.rint(np.sqrt(np.asarray(lower, dtype=np.float64) * upper))
    return np.clip(middle.astype(np.int64), lower, upper)


def _seed(text: str, where: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise PredictionError(f"{where}: seed must be an integer >= 0, got {text!r}")
    if int(text) > MAX_SEED:
        raise PredictionError(
            f"{where}: seed must be at most 2**63 - 1, got a number of {len(text)} digits"
        )
    return int(text)


def _outputs(outputs: Any, where: str) -> np.ndarray:
    """The true lengths ``outputs`` as an ``int64`` array, checked."""
    return check_int_array(outputs, where, 1, MAX_LENGTH, error=PredictionError)


def _number(text: str, name: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise PredictionError(f"{where}: {name} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise PredictionError(f"{where}: {name} must be finite, got {text!r}")
    return value


def ratio_intervals(outputs: np.ndarray, alpha: float, seed: int) -> Intervals:
    r"""Intervals of ratio about :math:`\alpha` containing each true length.

    The true length is placed at a uniformly drawn position :math:`\theta_i \in [0, 1)`
    of the interval on a log scale,

    .. math:: \ell_i = \max\bigl(1, \lfloor o_i \alpha^{\theta_i} \rfloor\bigr), \qquad
              u_i = \max\bigl(o_i, \lceil \ell_i / \alpha \rceil\bigr),

    so :math:`\ell_i \le o_i \le u_i` and :math:`\ell_i/u_i` is :math:`\alpha` up to the
    rounding. Chen, Ye and Zhou (arXiv 2508.14544) measure their algorithms against such
    intervals of ratio :math:`\alpha`; where in the interval the true length lies is our
    choice (we could read the paper's abstract and summaries, not its experimental
    section): uniform on a log scale, so that no end is favoured and an algorithm that
    trusts either end is tested. :math:`\alpha = 1` gives the perfect prediction.

    Raises
    ------
    InputTypeError, PredictionError
        For lengths that are not integers from 1 to ``MAX_LENGTH``, ``alpha`` outside
        ``(0, 1]`` (or NaN), a seed that is not an integer from 0 to ``MAX_SEED``.
    """
    true = _outputs(outputs, "ratio_intervals: outputs")
    alpha = check_real(alpha, "ratio_intervals: alpha", 0, 1, error=PredictionError, above=True)
    seed = check_seed(seed, "ratio_intervals: seed", error=PredictionError)
    theta = np.random.default_rng([_STREAMS["interval"], seed]).random(true.size)
    lower = np.maximum(1, np.floor(true * alpha**theta + 1e-9)).astype(np.int64)
    lower = np.minimum(lower, true)
    wide = np.minimum(np.ceil(lower / alpha - 1e-9), MAX_LENGTH)  # a tiny alpha: capped
    upper = np.maximum(true, wide.astype(np.int64))
    return Intervals(lower, upper, f"interval:{alpha:g}:{seed}", exact=True)


def bucket_intervals(outputs: np.ndarray, accuracy: float, seed: int) -> Intervals:
    r"""The output-length class a noisy classifier names, as the interval of that class.

    Classes double: class :math:`k \ge 0` is :math:`[2^k, 2^{k+1} - 1]`, so every interval
    has ratio about :math:`1/2` and request :math:`i`'s true class is
    :math:`\lfloor \log_2 o_i \rfloor`. The classifier names the true class with
    probability ``accuracy``, else a neighbouring one, the class below or above with
    equal probability (above for class 0). Chen, Ye and Zhou (arXiv 2508.14544) take
    predictions as such an interval classification; the class edges and the error model
    are our choice, documented in ``docs/design.md``.

    Raises
    ------
    InputTypeError, PredictionError
        For lengths that are not integers from 1 to ``MAX_LENGTH``, ``accuracy`` outside
        ``[0, 1]`` (or NaN), a seed that is not an integer from 0 to ``MAX_SEED``.
    """
    true = _outputs(outputs, "bucket_intervals: outputs")
    accuracy = check_real(accuracy, "bucket_intervals: accuracy", 0, 1, error=PredictionError)
    seed = check_seed(seed, "bucket_intervals: seed", error=PredictionError)
    rng = np.random.default_rng([_STREAMS["buckets"], seed])
    right = rng.random(true.size) < accuracy
    up = rng.random(true.size) < 0.5
    klass = np.floor(np.log2(true)).astype(np.int64)
    # exact integer class: float log2 may round at powers of two
    klass += (np.left_shift(1, klass + 1) <= true).astype(np.int64)
    klass -= (np.left_shift(1, klass) > true).astype(np.int64)
    named = np.where(right, klass, np.where(up | (klass == 0), klass + 1, klass - 1))
    lower = np.left_shift(1, named)
    upper = np.left_shift(1, named + 1) - 1
    return Intervals(lower, upper, f"buckets:{accuracy:g}:{seed}", exact=accuracy >= 1)


def lognormal_points(outputs: np.ndarray, cv: float, seed: int) -> np.ndarray:
    r"""Point predictions :math:`\hat o_i = \max(1, \mathrm{round}(o_i X_i))` with
    :math:`\ln X_i \sim \mathcal N(-\sigma^2/2, \sigma^2)`, :math:`\sigma^2 = \ln(1+v^2)`:
    a multiplicative error of mean 1 and coefficient of variation :math:`v` = ``cv``
    (the serving simulator's model, ``schedlab/serving/prediction.py``, same stream).

    Raises
    ------
    InputTypeError, PredictionError
        For lengths that are not integers from 1 to ``MAX_LENGTH``, ``cv`` outside
        ``[0, MAX_CV]`` (or NaN), a seed that is not an integer from 0 to ``MAX_SEED``.
    """
    true = _outputs(outputs, "lognormal_points: outputs")
    cv = check_real(cv, "lognormal_points: cv", 0, MAX_CV, error=PredictionError)
    seed = check_seed(seed, "lognormal_points: seed", error=PredictionError)
    if cv == 0:
        return true.copy()
    sigma = math.sqrt(math.log1p(cv * cv))
    factor = np.random.default_rng([_STREAMS["lognormal"], seed]).lognormal(
        -sigma * sigma / 2, sigma, true.size
    )
    return np.maximum(1, np.rint(true * factor)).astype(np.int64)


@dataclass(frozen=True)
class PredictionModel:
    """A prediction model as :func:`predict` finds it by the first field of a spec.

    Attributes
    ----------
    form
        How its spec is spelt, for messages (``"interval:ALPHA[:SEED]"``).
    fields
        The fewest and most ``:`` fields its spec has after the name.
    draw
        ``draw(outputs, fields, seed, where) -> Intervals``: the intervals for the true
        lengths ``outputs`` from the spec's ``fields`` (``seed``: the one to use when
        they name none); raises :class:`~schedlab.errors.PredictionError` naming
        ``where`` for a field out of its domain.
    """

    form: str
    fields: tuple[int, int]
    draw: Callable[[np.ndarray, tuple[str, ...], int, str], Intervals]


def _perfect(true: np.ndarray, fields: tuple[str, ...], seed: int, where: str) -> Intervals:
    return Intervals(true, true, "perfect", exact=True)


def _interval(true: np.ndarray, fields: tuple[str, ...], seed: int, where: str) -> Intervals:
    alpha = _number(fields[0], "alpha", where)
    if not 0 < alpha <= 1:
        raise PredictionError(f"{where}: alpha must be in (0, 1], got {fields[0]}")
    return ratio_intervals(true, alpha, _seed(fields[1], where) if len(fields) == 2 else seed)


def _buckets(true: np.ndarray, fields: tuple[str, ...], seed: int, where: str) -> Intervals:
    accuracy = BUCKET_ACCURACY
    if len(fields) == 2:
        accuracy = _number(fields[0], "the bucket accuracy", where)
        if not 0 <= accuracy <= 1:
            raise PredictionError(
                f"{where}: the bucket accuracy must be in [0, 1], got {fields[0]}"
            )
    return bucket_intervals(true, accuracy, _seed(fields[-1], where) if fields else seed)


def _lognormal(true: np.ndarray, fields: tuple[str, ...], seed: int, where: str) -> Intervals:
    cv = _number(fields[0], "CV", where)
    if not 0 <= cv <= MAX_CV:
        raise PredictionError(f"{where}: CV must be in [0, {MAX_CV:g}], got {fields[0]}")
    drawn = _seed(fields[1], where) if len(fields) == 2 else seed
    points = lognormal_points(true, cv, drawn)
    return Intervals(points, points, f"lognormal:{cv:g}:{drawn}", exact=cv == 0)


#: Entry-point group of installed prediction models: ``name = "module:PREDICTION_MODEL"``.
ENTRY_POINTS = "schedlab.prediction_models"

#: The prediction models by the first field of their spec: the built-ins and any
#: registered or installed (:class:`~schedlab.registry.Registry`; module docs).
PREDICTION_MODELS: Registry[PredictionModel] = Registry(
    "prediction model",
    PredictionModel,
    ENTRY_POINTS,
    (
        ("perfect", PredictionModel("perfect", (0, 0), _perfect)),
        ("interval", PredictionModel("interval:ALPHA[:SEED]", (1, 2), _interval)),
        ("buckets", PredictionModel("buckets[:SEED] or buckets:ACCURACY:SEED", (0, 2), _buckets)),
        ("lognormal", PredictionModel("lognormal:CV[:SEED]", (1, 2), _lognormal)),
    ),
)


def predict(
    spec: str, outputs: np.ndarray | Sequence[int], seed: int = 0, *, where: str = "predictions"
) -> Intervals:
    """The intervals model ``spec`` (module docs) predicts for the true lengths ``outputs``.

    Parameters
    ----------
    spec
        ``perfect``, ``interval:ALPHA[:SEED]``, ``buckets[:SEED]``,
        ``buckets:ACCURACY:SEED``, ``lognormal:CV[:SEED]``, or the spec of a model
        registered in :data:`PREDICTION_MODELS`.
    outputs
        The true output lengths, one per request (each ``>= 1``).
    seed
        The seed when ``spec`` names none.
    where
        The place named by errors (the option or flag the spec came from).

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for a ``spec`` or ``where`` that is no string, ``outputs`` that
        are not a sequence of integers, a ``seed`` that is no integer.
    PredictionError
        ``"{where}: ..."`` for an unknown model, a malformed field, ``ALPHA`` outside
        ``(0, 1]``, ``ACCURACY`` outside ``[0, 1]``, ``CV`` outside ``[0, MAX_CV]``, a
        seed in the spec above ``MAX_SEED``; ``"predict: ..."`` for a length outside
        ``[1, MAX_LENGTH]`` or a ``seed`` outside ``[0, MAX_SEED]``.
    """
    check_type(where, (str,), "predict: where")
    check_type(spec, (str,), f"{where}: spec")
    true = _outputs(outputs, "predict: outputs")
    seed = check_seed(seed, "predict: seed", error=PredictionError)
    name, *fields = spec.split(":")
    if name not in PREDICTION_MODELS:
        known = ", ".join(PREDICTION_MODELS.names())
        raise PredictionError(f"{where}: unknown prediction model {name!r}; known: {known}")
    model = PREDICTION_MODELS.get(name)
    least, most = model.fields
    if not least <= len(fields) <= most:
        raise PredictionError(f"{where}: expected {model.form}, got {spec!r}")
    return model.draw(true, tuple(fields), seed, where)


class _Request(Protocol):
    @property
    def id(self) -> str | None: ...


class _Requests(Protocol):
    @property
    def requests(self) -> Sequence[_Request]: ...


def _integer(value: Any, where: str) -> int:
    if isinstance(value, str):
        value = value.strip()
        if not value.lstrip("-").isdigit():
            raise PredictionError(f"{where}: expected an integer, got {value!r}")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PredictionError(f"{where}: expected an integer, got {value!r}")
    if abs(value) > MAX_LENGTH:
        raise PredictionError(f"{where}: must be at most {MAX_LENGTH} (2**40) in size")
    return value


def _rows(path: str | Path, text: str) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
    """The rows of a prediction file (place, fields) and its declared exactness."""
    if str(path).endswith(".json"):
        data = parse_json(text, str(path))
        exact = False
        if isinstance(data, dict):
            check_keys(data, {"predictions", "exact"}, str(path))
            exact = data.get("exact", False)
            if not isinstance(exact, bool):
                raise FormatError(f"{path}: exact: expected true or false, got {exact!r}")
            data = data.get("predictions")
        if not isinstance(data, list):
            raise FormatError(f"{path}: predictions: expected a list of objects")
        rows = []
        for k, entry in enumerate(data):
            place = f"{path}: predictions[{k}]"
            if not isinstance(entry, dict):
                raise FormatError(f"{place}: expected an object, got {entry!r}")
            check_keys(entry, {"id", "lower", "upper"}, place)
            rows.append((place, entry))
        return rows, exact
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or not {"id", "lower", "upper"} <= set(reader.fieldnames):
        raise FormatError(f"{path}: line 1: expected a header with id, lower, upper")
    rows = []
    for row in reader:
        place = f"{path}: line {reader.line_num}"
        if None in row:  # csv.DictReader's key for the fields past the header's
            raise FormatError(f"{place}: more fields than the header's {len(reader.fieldnames)}")
        rows.append((place, dict(row)))
    return rows, False


def read_predictions(path: str | Path, instance: _Requests) -> Intervals:
    """The intervals a file gives the requests of ``instance``, by request id.

    A CSV file has a header with columns ``id,lower,upper`` and one row per request; a
    JSON file is a list of ``{"id", "lower", "upper"}`` objects, or an object
    ``{"predictions": [...], "exact": false}``. A request's id is its ``id``, or its index
    (``"0"``, ``"1"``, ...) when it has none. Only a JSON file may declare its intervals
    exact; a caller then checks them against the true lengths with
    :meth:`Intervals.check`.

    Raises
    ------
    PredictionError
        Naming the file and row: an id the instance does not have, an id given twice, a
        value that is not an integer, ``lower < 1`` or ``lower > upper``; or naming the
        file: requests left without a prediction.
    FormatError, DataNotFoundError, FileAccessError
        For a file that is malformed or cannot be read.
    InputTypeError
        (a ``TypeError``) for an ``instance`` without a sequence of ``requests`` that have
        an ``id`` (a path, a number).
    """
    requests = getattr(instance, "requests", None)
    if not isinstance(requests, Sequence) or not all(hasattr(r, "id") for r in requests):
        raise InputTypeError(
            "read_predictions: instance: expected an instance (requests with ids), got "
            f"{type(instance).__name__} {instance!r:.60}"
        )
    ids = {
        (str(i) if request.id is None else request.id): i
        for i, request in enumerate(instance.requests)
    }
    n = len(instance.requests)
    lower = np.zeros(n, dtype=np.int64)
    upper = np.zeros(n, dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    rows, exact = _rows(path, read_text(path, "prediction file"))
    for place, entry in rows:
        for key in ("id", "lower", "upper"):
            if entry.get(key) in (None, ""):
                raise PredictionError(f"{place}: missing {key}")
        key = str(entry["id"]).strip()
        if key not in ids:
            raise PredictionError(f"{place}: unknown request id {key!r}")
        i = ids[key]
        if seen[i]:
            raise PredictionError(f"{place}: request id {key!r} given twice")
        low = _integer(entry["lower"], f"{place}: lower")
        high = _integer(entry["upper"], f"{place}: upper")
        if low < 1 or low > high:
            raise PredictionError(
                f"{place}: interval [{low}, {high}] must have 1 <= lower <= upper"
            )
        lower[i], upper[i], seen[i] = low, high, True
    if not seen.all():
        missing = np.flatnonzero(~seen)
        shown = ", ".join(str(int(i)) for i in missing[:5]) + (" ..." if missing.size > 5 else "")
        raise PredictionError(f"{path}: {missing.size} request(s) without a prediction: {shown}")
    return Intervals(lower, upper, str(path), exact)
