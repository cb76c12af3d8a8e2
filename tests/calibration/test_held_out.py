"""Held-out evidence: the skew term's cross-validation and the ops a calibration keeps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.calibration.fit import calibrate
from schedlab.calibration.held_out import (
    ErrorStats,
    chosen_skew,
    skew_cross_validation,
    skew_variant,
    unearned_ops,
)
from schedlab.calibration.layouts import get_layout
from schedlab.calibration.profiles import SkewSamples
from schedlab.calibration.skew import SkewTable


def bimodal(alpha_of, rows: int = 400, seed: int = 0, noise: float = 0.0) -> SkewSamples:
    """Made-up skewed batches whose time is t_mean + alpha (t_max - t_mean), with
    ``alpha_of(n)`` and relative noise."""
    rng = np.random.default_rng(seed)
    n = rng.choice([4, 8, 32, 128], rows).astype(float)
    ratio = rng.choice([0.125, 0.25, 0.5, 0.75], rows)
    small = rng.choice([128, 512, 2048], rows).astype(float)
    big = small * rng.choice([2, 4, 8], rows)
    mean = small + ratio * (big - small)
    t_mean = 20 + 0.01 * n * mean
    t_max = 20 + 0.01 * n * big
    alpha = np.array([alpha_of(v) for v in n])
    t_skew = (t_mean + alpha * (t_max - t_mean)) * (1 + noise * rng.standard_normal(rows))
    zeros = np.zeros(rows)
    return SkewSamples(n, ratio, zeros, zeros, small, big, mean, t_mean, t_max, t_skew)


def test_no_skew_chooses_no_correction():
    errors = skew_cross_validation(bimodal(lambda n: 0.0))
    assert chosen_skew(errors) == "none" and errors["none"].mape_pct == 0


def test_one_alpha_is_recovered_and_pooled_wins_over_none():
    samples = bimodal(lambda n: 0.3)
    table = SkewTable.fit(samples)
    assert table.default == pytest.approx(0.3)
    errors = skew_cross_validation(samples)
    assert errors["pooled"].mape_pct < 1e-9 < errors["none"].mape_pct
    assert chosen_skew(errors) == "pooled"  # as good as bucket: the simpler one


def test_alpha_by_decode_count_needs_the_buckets():
    samples = bimodal(lambda n: 0.1 if n <= 8 else 0.6, noise=0.01)
    errors = skew_cross_validation(samples)
    assert chosen_skew(errors) == "bucket"
    assert errors["bucket"].mape_pct < errors["pooled"].mape_pct < errors["none"].mape_pct
    assert skew_variant(SkewTable.fit(samples), "none") is None
    with pytest.raises(ValueError, match="skew variant"):
        skew_variant(SkewTable.fit(samples), "all")


@settings(max_examples=30, deadline=None)
@given(st.floats(0.0, 1.0), st.integers(0, 10_000))
def test_a_fitted_alpha_stays_in_the_unit_interval_and_predicts_between_the_endpoints(a, seed):
    samples = bimodal(lambda n: a, rows=60, seed=seed, noise=0.05)
    table = SkewTable.fit(samples)
    assert 0 <= table.default <= 1 and all(0 <= v <= 1 for v in table.buckets.values())
    predicted = table.predict_us(samples)
    assert np.all(predicted >= samples.t_mean_us - 1e-9)
    assert np.all(predicted <= samples.t_max_us + 1e-9)


def test_one_op_of_each_needed_group_stays():
    layout = get_layout("llama", "test")
    full = ErrorStats(10, 1.0, 1.0, 1.0, 1.0)
    better = ErrorStats(10, 0.5, 0.5, 0.5, 0.5)
    worse = ErrorStats(10, 2.0, 2.0, 2.0, 2.0)
    ops = (*layout.per_layer, *layout.per_forward, *layout.per_sequence)
    every = {f"op {op}": better for op in ops}
    first = next(iter(layout.per_layer))
    every[f"op {first}"] = ErrorStats(10, 0.9, 0, 0, 0)  # the least bad to lose
    dropped = unearned_ops(every, full, layout)
    assert set(layout.per_layer) - set(dropped) == {first}
    assert len(set(layout.per_sequence) - set(dropped)) == 1
    kept = unearned_ops({f"op {op}": worse for op in ops}, full, layout)
    assert kept == ()


def test_a_real_profile_keeps_what_earns_its_place(real_profile):
    model, report = calibrate(real_profile, "meta-llama/Llama-3.1-8B")
    assert report.skew_choice in ("none", "pooled", "bucket")
    chosen = report.skew_held_out[report.skew_choice]
    assert all(chosen.mape_pct <= e.mape_pct for e in report.skew_held_out.values())
    kept = {op for op, *_ in (*model.layer_ops, *model.forward_ops, *model.head_ops)}
    every = report.iteration_every_op
    assert every is not None and report.iteration.mape_pct <= every.mape_pct
    for term, stats in report.ablations.items():
        if term.startswith("op "):
            assert (term[3:] in kept) == (stats.mape_pct > every.mape_pct), term
    assert report.ablations["attention by KV length"].mape_pct > every.mape_pct
