"""The prediction models of :mod:`schedlab.predictions`: their promises, their seeds and
their one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import FormatError, InputError, PredictionError
from schedlab.offline.instance import Instance, Request
from schedlab.predictions import Intervals, predict, read_predictions

LENGTHS = np.array([1, 2, 3, 7, 8, 100, 513, 4096, 1, 40])

lengths = st.lists(st.integers(1, 5000), min_size=1, max_size=40).map(np.array)


def test_perfect_is_the_true_length() -> None:
    intervals = predict("perfect", LENGTHS)
    assert intervals.exact and intervals.model == "perfect"
    assert intervals.lower.tolist() == LENGTHS.tolist() == intervals.upper.tolist()
    assert intervals.point().tolist() == LENGTHS.tolist()


@settings(max_examples=40, deadline=None)
@given(lengths, st.floats(0.01, 1.0), st.integers(0, 2**32))
def test_ratio_intervals_contain_the_length_at_about_alpha(
    true: np.ndarray, alpha: float, seed: int
) -> None:
    intervals = predict(f"interval:{alpha!r}:{seed}", true)
    intervals.check(true, "test")  # exact: contains every true length
    assert intervals.exact
    assert ((intervals.lower <= true) & (true <= intervals.upper)).all()
    # the ratio is alpha up to rounding: u = ceil(l / alpha) unless o sits above it
    assert (intervals.upper >= np.ceil(intervals.lower / alpha - 1e-9)).all()
    assert (intervals.upper <= np.maximum(true, intervals.lower / alpha + 1)).all()
    point = intervals.point()
    assert ((intervals.lower <= point) & (point <= intervals.upper)).all()


def test_alpha_one_is_perfect_and_small_alpha_is_wide() -> None:
    one = predict("interval:1:5", LENGTHS)
    assert one.lower.tolist() == LENGTHS.tolist() == one.upper.tolist()
    wide = predict("interval:0.1:5", np.full(200, 1000))
    assert np.median(wide.upper / wide.lower) == pytest.approx(10, rel=0.01)
    # the true length is spread over the interval, not always at one end
    assert (wide.lower < 1000).mean() > 0.8 and (wide.upper > 1000).mean() > 0.8


def test_the_seed_in_the_spec_wins_and_fixes_the_draw() -> None:
    a = predict("interval:0.5:7", LENGTHS, seed=1)
    b = predict("interval:0.5:7", LENGTHS, seed=2)
    c = predict("interval:0.5", LENGTHS, seed=7)
    d = predict("interval:0.5", LENGTHS, seed=8)
    assert a.lower.tolist() == b.lower.tolist() == c.lower.tolist()
    assert a.model == c.model == "interval:0.5:7"
    assert d.lower.tolist() != a.lower.tolist()


def test_buckets_name_a_doubling_class_right_mostly() -> None:
    true = np.arange(1, 5001)
    intervals = predict("buckets:0.8:3", true)
    assert not intervals.exact
    # each interval is a class [2^k, 2^(k+1) - 1]
    k = np.log2(intervals.lower).astype(int)
    assert (intervals.lower == 2**k).all() and (intervals.upper == 2 ** (k + 1) - 1).all()
    inside = (intervals.lower <= true) & (true <= intervals.upper)
    assert 0.77 < inside.mean() < 0.83
    # a miss is a neighbouring class
    klass = np.floor(np.log2(true)).astype(int)
    assert (np.abs(k - klass) <= 1).all()
    perfect = predict("buckets:1:3", true)
    assert perfect.exact
    perfect.check(true, "test")


def test_buckets_class_edges_at_powers_of_two() -> None:
    true = np.array([1, 2, 3, 4, 7, 8, 1023, 1024, 2**40 - 1, 2**40])
    intervals = predict("buckets:1:0", true)
    assert intervals.lower.tolist() == [1, 2, 2, 4, 4, 8, 512, 1024, 2**39, 2**40]


def test_lognormal_is_the_serving_simulator_s_model() -> None:
    true = np.arange(1, 2001)
    intervals = predict("lognormal:0.5:11", true)
    assert intervals.lower.tolist() == intervals.upper.tolist()
    # the draws of the serving simulator's former prediction_cv (its stream, its formula)
    sigma = np.sqrt(np.log1p(0.5**2))
    factor = np.random.default_rng([0x707265, 11]).lognormal(-(sigma**2) / 2, sigma, true.size)
    assert intervals.lower.tolist() == np.maximum(1, np.rint(true * factor)).tolist()
    assert not intervals.exact and predict("lognormal:0:1", true).exact
    ratio = intervals.lower / true
    assert ratio.mean() == pytest.approx(1.0, abs=0.05)
    assert ratio.std() == pytest.approx(0.5, abs=0.08)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("interval:0", r"^--predictions: alpha must be in \(0, 1\], got 0$"),
        ("interval:1.5:2", r"^--predictions: alpha must be in \(0, 1\], got 1.5$"),
        ("interval:nan", r"^--predictions: alpha must be finite, got 'nan'$"),
        ("interval", r"^--predictions: expected interval:ALPHA\[:SEED\], got 'interval'$"),
        ("interval:0.5:-1", r"^--predictions: seed must be an integer >= 0, got '-1'$"),
        ("lognormal:-0.1", r"^--predictions: CV must be in \[0, 10\], got -0.1$"),
        ("lognormal:x", r"^--predictions: CV must be a number, got 'x'$"),
        ("buckets:2:1", r"^--predictions: the bucket accuracy must be in \[0, 1\], got 2$"),
        ("perfect:3", r"^--predictions: expected perfect, got 'perfect:3'$"),
        ("oracle", r"^--predictions: unknown prediction model 'oracle'; known: perfect, "),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_place(spec: str, message: str) -> None:
    with pytest.raises(PredictionError, match=message) as info:
        predict(spec, LENGTHS, where="--predictions")
    assert isinstance(info.value, InputError) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("lower", "upper", "exact", "message"),
    [
        ([1, 2], [1, 2], False, r"^p: 2 predictions for 3 requests$"),
        ([1, 0, 3], [1, 2, 3], False, r"^p: request 1: interval \[0, 2\] has its lower end below"),
        ([1, 3, 3], [1, 2, 3], False, r"^p: request 1: interval \[3, 2\] has its lower end above"),
        ([1, 2, 4], [1, 2, 5], True, r"^p: request 2: interval \[4, 5\] excludes the true len"),
    ],
)
def test_check_refuses_bad_intervals(
    lower: list[int], upper: list[int], exact: bool, message: str
) -> None:
    intervals = Intervals(np.array(lower), np.array(upper), "m", exact)
    with pytest.raises(PredictionError, match=message):
        intervals.check(np.array([1, 2, 3]), "p")


def test_an_inexact_interval_may_miss() -> None:
    Intervals(np.array([4]), np.array([5]), "m", exact=False).check(np.array([3]), "p")


INSTANCE = Instance(
    50, (Request(1, 3, id="a"), Request(2, 4, id="b"), Request(0, 5)), name="three"
)


def test_a_prediction_file_is_read_by_request_id(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper\nb,2,8\n2,5,5\na,1,3\n")
    intervals = read_predictions(path, INSTANCE)
    assert intervals.lower.tolist() == [1, 2, 5] and intervals.upper.tolist() == [3, 8, 5]
    assert not intervals.exact
    path = tmp_path / "p.json"
    rows = [{"id": "a", "lower": 3, "upper": 3}, {"id": "b", "lower": 4, "upper": 4}]
    rows.append({"id": "2", "lower": 5, "upper": 5})
    path.write_text(json.dumps({"predictions": rows, "exact": True}))
    exact = read_predictions(path, INSTANCE)
    assert exact.exact
    exact.check(INSTANCE.output, "file")


@pytest.mark.parametrize(
    ("rows", "error", "message"),
    [
        ("a,1,3\nz,2,2\n", PredictionError, r"p.csv: line 3: unknown request id 'z'$"),
        ("a,1,3\na,2,2\n", PredictionError, r"p.csv: line 3: request id 'a' given twice$"),
        ("a,4,3\n", PredictionError, r"p.csv: line 2: interval \[4, 3\] must have 1 <="),
        ("a,0,3\n", PredictionError, r"p.csv: line 2: interval \[0, 3\] must have 1 <="),
        ("a,x,3\n", PredictionError, r"p.csv: line 2: lower: expected an integer, got 'x'"),
        ("a,1,3\n", PredictionError, r"p.csv: 2 request\(s\) without a prediction: 1, 2$"),
        ("HEAD", FormatError, r"p.csv: line 1: expected a header with id, lower, upper"),
        ("a,1,99999999999999999999\n", PredictionError, r"p.csv: line 2: upper: must be at"),
        ("a,1,3,7\n", FormatError, r"p.csv: line 2: more fields than the header's 3"),
    ],
)
def test_a_bad_prediction_file_is_one_line_naming_file_and_row(
    tmp_path: Path, rows: str, error: type, message: str
) -> None:
    path = tmp_path / "p.csv"
    path.write_text("id,low,up\na,1,3\n" if rows == "HEAD" else "id,lower,upper\n" + rows)
    with pytest.raises(error, match=message):
        read_predictions(path, INSTANCE)


def test_a_tiny_alpha_is_wide_and_never_wraps_to_the_true_length() -> None:
    outputs = np.array([5, 100, 4000])
    wide = predict("interval:1e-30:0", outputs)
    assert (wide.upper == 2**40).all()  # capped at the largest length, not wrapped
    assert (wide.lower <= outputs).all() and (outputs <= wide.upper).all()
