"""Types and numbers checked at the door of every public function (issue 54, item 4).

A walk over every function the ``__all__`` of :mod:`schedlab.serving`,
:mod:`schedlab.serving.cluster`, :mod:`schedlab.predictions` and
:mod:`schedlab.offline.online` exports, calling each with one argument at a time
replaced by a wrong value (a string, ``None``, NaN, ``-1``, ``10**40``, a list): the
call must succeed (the value is legitimately accepted) or raise a
:class:`~schedlab.errors.SchedlabError`, never another exception. Then the cases
measured on main (issue 54, "What was measured", case 5), each with the typed error it
now raises.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import schedlab
from schedlab.errors import (
    InputError,
    InputTypeError,
    PredictionError,
    SchedlabError,
    ServingError,
)
from schedlab.offline import online
from schedlab.predictions import predict, read_predictions
from schedlab.serving import (
    SLO,
    SLOWEAVE_DEFAULT,
    EngineConfig,
    FluidLoad,
    PolicyContext,
    Scenario,
    SLOWeaveState,
    choose_chunk,
    policy_registry,
    routers,
    workloads,
)
from schedlab.serving import cost_model as cost_models
from schedlab.serving.cluster import Cluster, parse_nodes, simulate_cluster
from tests.conftest import INSTANCES
from tests.serving.streams import FLAT, stream_of

TINY = schedlab.read_instance(INSTANCES / "tiny-1.json")
STATE = SLOWeaveState(0.0, 0.05, 4, 1000, 500)
SCENARIO = Scenario(policy="sloweave", seed=0)
STREAM = stream_of([0.0, 0.01, 0.02], [30, 40, 50], [5, 6, 7])
CLUSTER = Cluster(parse_nodes("1P1D"), router="disaggregated", scenario=SCENARIO)

#: The wrong values each argument is given in turn.
WRONG = ("text", None, math.nan, -1, 10**40, [1])


def _serving_classes(tmp: Path) -> dict[str, dict[str, Any]]:
    """Valid arguments of :mod:`schedlab.serving`'s checked classes."""
    del tmp
    return {
        "Scenario": dict(
            policy="sloweave",
            cost_model=FLAT,
            slo=SLO(5.0, 0.05),
            engine=EngineConfig(),
            actual_cost_model=None,
            noise_cv=0.0,
            margin_s=None,
            seed=0,
            replicas=1,
            lockstep=False,
            prediction_cv=0.0,
            engine_kind="schedlab",
            engine_model=None,
            predictions=None,
        ),
        "SLO": dict(ttft_s=5.0, tpot_s=0.05, kind="every-token"),
        "EngineConfig": dict(
            kv_tokens=4096,
            block_size=16,
            max_num_seqs=8,
            max_num_batched_tokens=512,
            prefix_caching=True,
            reserve_full_prompt=True,
            async_scheduling=False,
        ),
        "PolicyContext": dict(
            model=SLOWEAVE_DEFAULT, config=EngineConfig(kv_tokens=4096), tpot_s=0.05, margin_s=None
        ),
        "FluidLoad": dict(mean_prompt=10.0, mean_output=5.0, kv_moment=30.0, n_requests=3),
        "KVCache": dict(total_blocks=64, block_size=16, prefix_caching=True),
    }


def _serving(tmp: Path) -> dict[str, dict[str, Any]]:
    """Valid arguments of :mod:`schedlab.serving`'s functions."""
    model_path = tmp / "model.json"
    cost_models.save_cost_model(FLAT, model_path)
    context = PolicyContext(SLOWEAVE_DEFAULT, EngineConfig(kv_tokens=4096), 0.05)
    return {
        "capacity": dict(
            workload="chat",
            scenario=SCENARIO,
            duration_s=2.0,
            target=0.9,
            rel_tol=0.5,
            start_rps=1.0,
            max_rps=2.0,
            data_dir=None,
            progress=False,
        ),
        "sweep": dict(
            workload="chat",
            policies=["vllm"],
            rates=[4.0],
            scenario=SCENARIO,
            duration_s=2.0,
            data_dir=None,
            executor=None,
        ),
        "check_monotone": dict(
            model=FLAT,
            c_max=64,
            n_decodes=(0, 1),
            priors=(0,),
            other_chunks=((),),
            kv_per_decode=16,
            limit=5,
        ),
        "choose_chunk": dict(
            state=STATE, model=SLOWEAVE_DEFAULT, c_max=64, margin_s=0.0, cap=None
        ),
        "get_cost_model": dict(spec="sloweave-default"),
        "headroom": dict(
            model=SLOWEAVE_DEFAULT,
            load=FluidLoad.of([100, 200], [50, 80]),
            tpot_s=0.05,
            workload="w",
            margin_s=0.0,
            chunks=(64, 128),
            kv_tokens=None,
        ),
        "load_cost_model": dict(path=model_path),
        "make_policy": dict(spec="sloweave", ctx=context),
        "make_workload": dict(name="chat", data_dir=None),
        "register_cost_model_kind": dict(kind="test-kind", loader=lambda data, where: FLAT),
        "register_policy": dict(
            name="test-policy",
            spec=policy_registry.PolicySpec(policy_registry.POLICIES["vllm"].factory),
        ),
        "register_router": dict(name="test-router", spec=routers.ROUTERS["round-robin"]),
        "register_workload": dict(
            name="test-workload", description="d", factory=workloads.WORKLOADS["chat"].factory
        ),
        "require_monotone": dict(model=FLAT, c_max=64, user="test"),
        "run_engine": dict(
            stream=STREAM,
            scenario=SCENARIO,
            stop_at_s=None,
            max_violations=None,
            record_batches=False,
        ),
        "save_cost_model": dict(model=FLAT, path=tmp / "saved.json"),
        "simulate": dict(
            workload="chat",
            scenario=SCENARIO,
            rate=4.0,
            duration_s=2.0,
            data_dir=None,
            stop_at_s=None,
            max_violations=None,
            record_batches=False,
            max_requests=1000,
        ),
    }


def _cluster(tmp: Path) -> dict[str, dict[str, Any]]:
    """Valid arguments of :mod:`schedlab.serving.cluster`'s functions."""
    del tmp
    return {
        "Node": dict(role="decode", policy=None, engine=None, cost_model=None),
        "Cluster": dict(
            nodes=parse_nodes("1P1D"),
            router="disaggregated",
            scenario=SCENARIO,
            link=None,
            prefill_policy="vllm",
            decode_policy=None,
        ),
        "is_sloweave": dict(policy="sloweave"),
        "kv_link": dict(link="25GB/s,20us", model="llama-3.1-8b", layers=False),
        "parse_nodes": dict(spec="1P1D", flag="--nodes"),
        "run_cluster": dict(
            stream=STREAM,
            cluster=CLUSTER,
            stop_at_s=None,
            record_batches=False,
            time_routing=False,
        ),
        "simulate_cluster": dict(
            workload="chat",
            cluster=CLUSTER,
            rate=4.0,
            duration_s=2.0,
            data_dir=None,
            max_requests=1000,
            time_routing=False,
            record_batches=False,
        ),
    }


def _predictions(tmp: Path) -> dict[str, dict[str, Any]]:
    """Valid arguments of :mod:`schedlab.predictions`' functions."""
    predictions_path = tmp / "predictions.csv"
    predictions_path.write_text("id,lower,upper\n0,1,9\n1,1,9\n2,1,9\n", encoding="utf-8")
    outputs = np.array([3, 5, 8])
    return {
        "Intervals": dict(lower=[1, 2], upper=[3, 4], model="m", exact=False),
        "bucket_intervals": dict(outputs=outputs, accuracy=0.8, seed=0),
        "geometric_mean": dict(lower=np.array([1, 2]), upper=np.array([3, 4])),
        "lognormal_points": dict(outputs=outputs, cv=0.5, seed=0),
        "predict": dict(spec="interval:0.5", outputs=outputs, seed=0, where="test"),
        "ratio_intervals": dict(outputs=outputs, alpha=0.5, seed=0),
        "read_predictions": dict(path=predictions_path, instance=_three_requests()),
    }


def _online(tmp: Path) -> dict[str, dict[str, Any]]:
    """Valid arguments of :mod:`schedlab.offline.online`'s functions."""
    del tmp
    runs = online.run_online(TINY, predict("perfect", TINY.output), online.POLICIES["a-max"]())
    return {
        "assert_runs_feasible": dict(instance=TINY, runs=runs),
        "evictions": dict(runs=runs),
        "last_starts": dict(runs=runs),
        "objective": dict(instance=TINY, runs=runs),
        "run_online": dict(
            instance=TINY,
            intervals=predict("perfect", TINY.output),
            policy=online.POLICIES["a-max"](),
        ),
        "runs_to_lists": dict(runs=runs),
        "verify_runs": dict(instance=TINY, runs=runs),
        "wasted_rounds": dict(runs=runs),
        "wasted_token_rounds": dict(instance=TINY, runs=runs),
    }


#: Where each module's valid examples come from.
EXAMPLES = {
    "schedlab.serving": lambda tmp: {**_serving_classes(tmp), **_serving(tmp)},
    "schedlab.serving.cluster": _cluster,
    "schedlab.predictions": _predictions,
    "schedlab.offline.online": _online,
}


def _examples(tmp: Path) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """Valid keyword arguments of every public function, by its qualified name; small, so
    that a call that accepts a wrong value still ends quickly."""
    return {
        f"{module}.{name}": (getattr(importlib.import_module(module), name), arguments)
        for module, examples in EXAMPLES.items()
        for name, arguments in examples(tmp).items()
    }


def _three_requests() -> Any:
    return schedlab.Instance(
        100, (schedlab.Request(5, 3), schedlab.Request(5, 4), schedlab.Request(5, 5))
    )


#: The public classes whose constructors check their fields; the records a simulation
#: makes in its loop (``SLOWeaveState``, the online ``Decision`` and ``View``) and the
#: results do not: ``choose_chunk`` and ``run_online`` check what they are given.
CHECKED_CLASSES = (
    "schedlab.serving.Scenario",
    "schedlab.serving.SLO",
    "schedlab.serving.EngineConfig",
    "schedlab.serving.PolicyContext",
    "schedlab.serving.FluidLoad",
    "schedlab.serving.KVCache",
    "schedlab.serving.cluster.Node",
    "schedlab.serving.cluster.Cluster",
    "schedlab.predictions.Intervals",
)

PUBLIC = sorted(
    [
        f"{module}.{name}"
        for module in EXAMPLES
        for name in importlib.import_module(module).__all__
        if inspect.isfunction(getattr(importlib.import_module(module), name))
    ]
    + list(CHECKED_CLASSES)
)


@pytest.fixture
def registries() -> Iterator[Callable[[], None]]:
    """A function that puts the policy, router, workload and cost-model registries back
    as they were (a call that registers must leave no trace)."""
    tables = (
        policy_registry.POLICIES,
        routers.ROUTERS,
        workloads.WORKLOADS,
        cost_models.COST_MODEL_KINDS,
    )
    saved = [(table, table.registered()) for table in tables]

    def restore() -> None:
        for table, before in saved:
            for name in table.registered():
                if name not in before:
                    table.unregister(name)

    yield restore
    restore()


def test_every_public_function_has_an_example(tmp_path):
    assert sorted(_examples(tmp_path)) == PUBLIC


@pytest.mark.parametrize("qualified", PUBLIC)
def test_a_wrong_value_is_refused_with_a_schedlab_error(
    qualified, tmp_path, registries, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # a string given for a path writes there
    function, valid = _examples(tmp_path)[qualified]
    function(**valid)
    registries()
    names = [
        name
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]
    assert set(names) == set(valid)
    escaped = []
    for name in names:
        for wrong in WRONG:
            try:
                function(**{**valid, name: wrong})
            except SchedlabError:
                pass
            except Exception as error:
                escaped.append(f"{name}={wrong!r:.20}: {type(error).__name__}: {error}")
            finally:
                registries()
    assert escaped == []


# --- the measured cases of issue 54 ("What was measured", case 5) --------------------


def _raises(
    error: type[SchedlabError], builtin: type[Exception], call: Callable[[], Any], match: str
) -> None:
    with pytest.raises(error, match=match) as info:
        call()
    assert isinstance(info.value, builtin) and isinstance(info.value, SchedlabError)


def test_a_cluster_of_nodes_given_as_text_is_a_type_error():
    # before: AttributeError: 'str' object has no attribute 'role'
    _raises(
        InputTypeError,
        TypeError,
        lambda: Cluster(nodes="2P2D"),
        r"^cluster: nodes: expected tuple or list, got str '2P2D'$",
    )
    _raises(
        InputTypeError,
        TypeError,
        lambda: simulate_cluster("chat", "2P2D"),
        r"^simulate_cluster: cluster: expected Cluster, got str '2P2D'$",
    )
    _raises(
        InputTypeError,
        TypeError,
        lambda: Cluster(nodes=("2P2D",)),
        r"^cluster: nodes\[0\]: expected Node, got str '2P2D'$",
    )


def test_read_predictions_refuses_a_number_for_the_instance(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper\n0,1,2\n", encoding="utf-8")
    _raises(
        InputTypeError,
        TypeError,
        lambda: read_predictions(path, 5),
        r"^read_predictions: instance: expected an instance \(requests with ids\), got int 5$",
    )


def test_choose_chunk_refuses_a_model_name_a_nan_deadline_and_negative_counts():
    _raises(
        InputTypeError,
        TypeError,
        lambda: choose_chunk(STATE, "sloweave-default"),
        r"^choose_chunk: model: expected CostModel, got str 'sloweave-default'$",
    )
    nan_deadline = SLOWeaveState(0.0, math.nan, 4, 1000, 500)
    _raises(
        ServingError,
        ValueError,
        lambda: choose_chunk(nan_deadline, SLOWEAVE_DEFAULT),
        r"^choose_chunk: state.next_deadline_s: must be a finite number, got nan$",
    )
    negative = SLOWeaveState(0.0, 0.05, -1, 1000, 500)
    _raises(
        ServingError,
        ValueError,
        lambda: choose_chunk(negative, SLOWEAVE_DEFAULT),
        r"^choose_chunk: state.n_decode: must be >= 0, got -1$",
    )
    _raises(
        InputTypeError,
        TypeError,
        lambda: choose_chunk(SLOWeaveState(0.0, 0.05, 4, 1000, 500.0), SLOWEAVE_DEFAULT),
        r"^choose_chunk: state.remaining: expected an integer, got float 500.0$",
    )
    _raises(
        ServingError,
        ValueError,
        lambda: choose_chunk(STATE, SLOWEAVE_DEFAULT, margin_s=math.nan),
        r"^choose_chunk: margin_s: must be a finite number, got nan$",
    )


@pytest.mark.parametrize(
    ("call", "error", "builtin", "match"),
    [
        (
            lambda: predict("perfect", "abc"),
            InputTypeError,
            TypeError,
            r"^predict: outputs: expected a sequence of integers, got str 'abc'$",
        ),
        (
            lambda: predict("perfect", ["a"]),
            InputTypeError,
            TypeError,
            r"^predict: outputs\[0\]: expected an integer, got str 'a'$",
        ),
        (
            lambda: predict("perfect", [3, 10**40]),
            PredictionError,
            ValueError,
            r"^predict: outputs\[1\]: must be <= 1099511627776, got a number of 41 digits$",
        ),
        (
            lambda: predict("perfect", [3, math.nan]),
            PredictionError,
            ValueError,
            r"^predict: outputs\[1\]: must be a finite number, got nan$",
        ),
        (
            lambda: predict("interval:0.5", [3], seed=-1),
            PredictionError,
            ValueError,
            r"^predict: seed: must be >= 0, got -1$",
        ),
        (
            lambda: predict("interval:0.5", [3], seed=10**40),
            PredictionError,
            ValueError,
            r"^predict: seed: must be <= 9223372036854775807, got a number of 41 digits$",
        ),
        (
            lambda: predict("interval:0.5", [3], seed="1"),
            InputTypeError,
            TypeError,
            r"^predict: seed: expected an integer, got str '1'$",
        ),
        (
            lambda: predict(5, [3]),
            InputTypeError,
            TypeError,
            r"^predictions: spec: expected a string, got int 5$",
        ),
        (
            lambda: predict("interval:0.5:" + "1" * 50, [3]),
            PredictionError,
            ValueError,
            r"^predictions: seed must be at most 2\*\*63 - 1, got a number of 50 digits$",
        ),
        (
            lambda: predict("interval:0.5:9223372036854775808", [3]),
            PredictionError,
            ValueError,
            r"^predictions: seed must be at most 2\*\*63 - 1, got a number of 19 digits$",
        ),
    ],
)
def test_predict_refuses_strings_huge_and_negative_arguments(call, error, builtin, match):
    # before: a bare ValueError or OverflowError, or (the 50-digit seed) an answer
    _raises(error, builtin, call, match)


def test_the_largest_seed_is_accepted_in_the_spec_and_as_argument():
    spec = predict("interval:0.5:9223372036854775807", [3, 5])
    argument = predict("interval:0.5", [3, 5], seed=2**63 - 1)
    assert spec.model == argument.model == "interval:0.5:9223372036854775807"
    assert np.array_equal(spec.lower, argument.lower)


def test_a_door_error_is_ours_and_the_builtin_one():
    # the hierarchy promise of schedlab.errors, for the door checks' two kinds
    assert issubclass(InputTypeError, TypeError) and issubclass(InputTypeError, SchedlabError)
    for error in (InputError, PredictionError, ServingError):
        assert issubclass(error, ValueError) and issubclass(error, SchedlabError)


# --- the review's findings after the first pass ---------------------------------------


def test_a_scenario_takes_numpys_integers_and_refuses_a_fractional_seed():
    scenario = Scenario(policy="sloweave", seed=np.int64(3), replicas=np.int32(2))
    assert (scenario.seed, scenario.replicas) == (3, 2)
    assert type(scenario.seed) is int and type(scenario.replicas) is int
    _raises(
        InputTypeError,
        TypeError,
        lambda: Scenario(seed=1.5),
        r"^scenario\.seed: expected an integer, got float 1\.5$",
    )
    _raises(ServingError, ValueError, lambda: Scenario(seed=-1), r"^scenario\.seed: must be >= 0")
    _raises(
        ServingError,
        ValueError,
        lambda: Scenario(replicas=0),
        r"^scenario\.replicas: must be >= 1, got 0$",
    )


def test_a_geometric_mean_of_ends_that_are_no_interval_is_refused():
    from schedlab.predictions import Intervals, geometric_mean

    assert geometric_mean(np.array([1, 4]), np.array([4, 9])).tolist() == [2, 6]
    _raises(
        PredictionError,
        ValueError,
        lambda: geometric_mean(np.array([-4, 1]), np.array([9, 2])),
        r"^geometric_mean: lower\[0\]: must be >= 1, got -4$",
    )
    _raises(
        PredictionError,
        ValueError,
        lambda: geometric_mean(np.array([1, 5]), np.array([2, 3])),
        r"^geometric_mean: interval 1: lower end 5 above 3$",
    )
    _raises(
        PredictionError,
        ValueError,
        lambda: Intervals(np.array([1, 2]), np.array([3]), "m", False),
        r"^intervals: 2 lower ends for 1 upper ends$",
    )
