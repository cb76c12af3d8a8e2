"""Planning with predicted intervals (issue 42, part 6): the estimates ``sloweave-kv``,
``sloweave-kv-amin`` and ``sloweave-kv-amax`` plan with, their refinement, runs under
every prediction model, and the ``--predictions`` option."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from schedlab.cli import main as schedlab
from schedlab.errors import PredictionError, SchedlabError, ServingError
from schedlab.predictions import PREDICTION_MODELS, Intervals
from schedlab.serving.capacity import capacity_grid
from schedlab.serving.cost_model import SLOWEAVE_DEFAULT
from schedlab.serving.driver import Driver
from schedlab.serving.engine import Engine
from schedlab.serving.iteration import IterationTime
from schedlab.serving.metrics import SLO
from schedlab.serving.prediction import (
    ESTIMATES,
    check_spec,
    predict_outputs,
    prediction_spec,
    refined_output,
)
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import simulate
from schedlab.serving.view import final_tokens, planned_output
from schedlab.testing import check_conservation, check_deadlines
from schedlab.testing.runs import ServingRun
from tests.serving.streams import kv_bound

#: Every prediction model (:data:`schedlab.predictions.PREDICTION_MODELS`), some at two settings.
SPECS = ("perfect", "interval:0.5", "interval:0.1", "buckets", "lognormal:0.5", "lognormal:2")
#: The policies that plan with predictions, by estimate.
KV_POLICIES = {"point": "sloweave-kv", "a-min": "sloweave-kv-amin", "a-max": "sloweave-kv-amax"}


def test_refined_output_is_the_tightest_known_bound():
    assert refined_output(5, 0) == 5
    assert refined_output(5, 4) == 5  # 4 emitted, 5 planned: one more to go
    assert refined_output(5, 5) == 6  # outlived its estimate: at least one more token
    assert refined_output(5, 40) == 41
    assert refined_output(1, 0) == 1


def _request(prompt, target, lower, point, upper):
    return SimpleNamespace(
        prompt=prompt,
        target=target,
        predicted_lower=lower,
        predicted_output=point,
        predicted_upper=upper,
    )


def test_each_estimate_starts_from_its_end_of_the_interval_and_is_refined():
    fresh = _request(100, 100, 10, 20, 40)
    assert [planned_output(fresh, e, 0) for e in ESTIMATES] == [20, 10, 40]
    assert [planned_output(fresh, e, 15) for e in ESTIMATES] == [20, 16, 40]
    assert [planned_output(fresh, e, 50) for e in ESTIMATES] == [51, 51, 51]
    # a request not decoding reserves prompt + planned - 1 tokens; one preempted after
    # 25 tokens (target = prompt + 25) is refined by what it generated
    assert [final_tokens(fresh, e) for e in ESTIMATES] == [119, 109, 139]
    resumed = _request(100, 125, 10, 20, 40)
    assert [final_tokens(resumed, e) for e in ESTIMATES] == [125, 125, 139]


def _run(stream, config, policy, predictions):
    """Serve ``stream`` with every iteration recorded, the requests carrying
    ``predictions``; the run and the policy's counters."""
    scenario = Scenario(policy, SLOWEAVE_DEFAULT, SLO(5.0, 0.010), config, seed=3)
    engine = Engine(
        scenario.build_policy(),
        config,
        IterationTime(SLOWEAVE_DEFAULT),
        slo=scenario.slo,
        record_batches=True,
    )
    driver = Driver(stream, [engine], predictions=predictions)
    run = driver.result(driver.run())
    return ServingRun(stream, scenario, run, True), engine.policy.stats


def _checked(served):
    """The checks every run passes: tokens and blocks conserved, deadlines kept where the
    decode-only batch allows, every request finished, the cache never over-full, and
    every eviction both logged and counted on its request."""
    check_conservation(served)
    check_deadlines(served)
    run = served.run
    assert all(r.finished for r in run.records)
    assert run.peak_kv_tokens <= served.scenario.engine.kv_tokens
    logged = sum(len(batch.preempted) for batch in run.batches)
    assert logged == sum(r.preemptions for r in run.records)
    return logged


def test_every_model_is_run():
    assert {spec.partition(":")[0] for spec in SPECS} == set(PREDICTION_MODELS)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("policy", ["vllm", *KV_POLICIES.values()])
def test_every_policy_runs_under_every_prediction_model(policy, spec):
    stream, config = kv_bound(7)
    _checked(_run(stream, config, policy, predict_outputs(spec, stream.output, 3))[0])


def _intervals(output, rng, low, high):
    """Intervals ``[o * a, o * b]`` around the true lengths, ``a`` from ``low`` to 1 and
    ``b`` from 1 to ``high`` (each containing the truth); the point is their middle."""
    lower = np.maximum(1, np.floor(output * rng.uniform(low, 1, output.size))).astype(np.int64)
    upper = np.ceil(output * rng.uniform(1, high, output.size)).astype(np.int64)
    return Intervals(lower, upper, "test", exact=True)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_upper_ends_never_evict_lower_ends_do(seed):
    # Planning every request at an upper bound of its length keeps the projected peak
    # above the true one: nothing is ever evicted (proofs/sloweave_kv.md's argument,
    # with over-estimates only freeing memory early). Planning at lower ends admits more
    # at once and evicts when they are outlived; the engine recomputes the newest.
    stream, config = kv_bound(seed)
    rng = np.random.default_rng(seed)
    predictions = _intervals(stream.output, rng, 0.05, 3.0)
    safe, safe_stats = _run(stream, config, "sloweave-kv-amax", predictions)
    assert _checked(safe) == 0
    bold, bold_stats = _run(stream, config, "sloweave-kv-amin", predictions)
    assert _checked(bold) > 0
    assert bold_stats["kv_gated"] < safe_stats["kv_gated"]


def test_exact_intervals_plan_as_sloweave_kv_does():
    # lower = upper = the truth: the three estimates are the same plan, the same run
    stream, config = kv_bound(4)
    exact = predict_outputs("perfect", stream.output, 0)
    runs = [_run(stream, config, p, exact)[0].run.records for p in KV_POLICIES.values()]
    assert runs[0] == runs[1] == runs[2]


def test_the_prediction_model_of_a_scenario():
    assert prediction_spec(None, 0.0) == "perfect"
    assert prediction_spec(None, 0.5) == "lognormal:0.5"
    assert prediction_spec("lognormal:1", 0.0) == "lognormal:1"
    with pytest.raises(ServingError, match="not both"):
        prediction_spec("lognormal:1", 0.5)
    with pytest.raises(PredictionError, match=r"scenario\.predictions: "):
        Scenario("sloweave-kv", predictions="nonsense")
    # prediction_cv v is lognormal:v, draw for draw
    a = simulate("chat", Scenario("sloweave-kv", seed=4, prediction_cv=1.0), duration_s=10.0)
    b = simulate(
        "chat", Scenario("sloweave-kv", seed=4, predictions="lognormal:1"), duration_s=10.0
    )
    assert a.records == b.records


@pytest.mark.parametrize(
    "spec", ["nonsense", "lognormal:x", "lognormal:-1", "perfect:3", "interval:0", "interval:1.5"]
)
def test_a_bad_model_is_one_line_naming_the_option(spec, capsys):
    with pytest.raises(PredictionError, match=r"^--predictions: "):
        check_spec(spec, "--predictions")
    argv = ["simulate", "--policy", "sloweave-kv", "--duration", "5s", "--predictions", spec]
    assert schedlab(argv) == 2
    err = capsys.readouterr().err
    assert "--predictions: " in err and len(err.splitlines()) == 1


def test_capacity_compares_policies_under_each_model(capsys):
    # vllm reads no prediction: searched once; each sloweave-kv policy once per model
    base = Scenario("sloweave-kv", seed=2)
    found = capacity_grid(
        "chat",
        ["vllm", "sloweave-kv-amin"],
        base,
        predictions=["perfect", "lognormal:1"],
        duration_s=10.0,
        rel_tol=0.5,
    )
    assert [(r.policy, r.predictions) for r in found] == [
        ("vllm", "perfect"),
        ("sloweave-kv-amin", "perfect"),
        ("sloweave-kv-amin", "lognormal:1"),
    ]
    with pytest.raises(SchedlabError, match="predictions: a model given twice"):
        capacity_grid("chat", ["vllm"], base, predictions=["perfect", "perfect"])
    argv = [
        *("capacity", "--policies", "vllm,sloweave-kv", "--predictions", "perfect,lognormal:1"),
        *("--duration", "10s", "--tolerance", "0.5", "--quiet", "--workers", "1"),
    ]
    assert schedlab(argv) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[1].split()[:4] == ["policy", "seed", "perfect", "lognormal:1"]
    vllm, kv = table[2].split(), table[3].split()
    assert vllm[0] == "vllm" and vllm[2] == vllm[3] and vllm[2].endswith("*")
    assert kv[0] == "sloweave-kv" and len(kv) == 4
