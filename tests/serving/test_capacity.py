"""Capacity bisection, its stop rules, and deterministic parallel sweeps."""

from __future__ import annotations

import importlib
import json
import math

import pytest

from schedlab.errors import FormatError, ServingError, UnknownNameError
from schedlab.jobs import Executor
from schedlab.serving.capacity import GridError, capacity, capacity_grid, probe, sweep
from schedlab.serving.metrics import SLO
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import simulate
from schedlab.serving.workloads import make_workload

SLO_25 = SLO(ttft_s=2.0, tpot_s=0.025)
VLLM = Scenario("vllm", slo=SLO_25)


def test_capacity_brackets_the_target():
    result = capacity("chat", VLLM, duration_s=30.0, rel_tol=0.05)
    assert not result.saturated and result.capacity_rps > 1.0
    passed = [p for p in result.probes if p.meets(0.9)]
    failed = [p for p in result.probes if not p.meets(0.9)]
    # The answer is the highest rate that met the target, and a failing rate lies
    # within the tolerance above it.
    assert result.capacity_rps == max(p.rate_rps for p in passed)
    above = min(p.rate_rps for p in failed if p.rate_rps > result.capacity_rps)
    assert above / result.capacity_rps - 1 <= 0.05
    assert all(p.attainment < 0.9 for p in failed)
    again = capacity("chat", VLLM, duration_s=30.0, rel_tol=0.05)
    assert again == result
    data = result.to_dict()
    assert {"policy", "workload", "tpot_s", "ttft_s", "capacity_rps"} <= set(data)


def test_capacity_zero_when_nothing_meets():
    # TPOT 1 ms is below one decode iteration (1.305 ms): requests with output > 1 miss.
    result = capacity("chat", VLLM.with_(slo=SLO(2.0, 0.001)), duration_s=20.0, start_rps=4.0)
    assert result.capacity_rps == 0.0
    assert [p.rate_rps for p in result.probes] == [4.0, 2.0, 1.0]


def test_an_answer_resting_on_a_run_without_requests_is_refused():
    # 1 ms of arrivals at up to 1,000 req/s: no rate draws a request, and empty runs once
    # "met" a TTFT of 1 us: 1,000 req/s was reported
    with pytest.raises(ServingError, match=r"no request arrives at 1000 req/s in 0.001 s"):
        capacity("chat", VLLM.with_(slo=SLO(1e-6, 0.025)), duration_s=0.001)
    empty = probe(make_workload("chat"), 1.0, VLLM, duration_s=0.001)
    assert empty.n_requests == 0 and not empty.meets(0.9)


def test_empty_runs_at_low_rates_do_not_stop_the_search():
    # at seed 0, chat draws no request at 0.02 req/s in 30 s: the search doubles on
    result = capacity("chat", VLLM, duration_s=30.0, start_rps=0.02, rel_tol=0.05)
    assert result.probes[0].n_requests == 0
    assert result.at_capacity is not None and result.at_capacity.n_requests > 0
    assert result.capacity_rps > 1.0


def test_exact_horizon_keeps_attainment():
    # Overloaded run: stopping at H = max(a + X + (o - 1) D) gives the same attainment
    # as draining every request (proof in the capacity module docstring).
    stream = make_workload("chat").generate(60.0, 20.0, seed=5)
    horizon = float((stream.arrival_s + SLO_25.ttft_s + (stream.output - 1) * SLO_25.tpot_s).max())
    full = simulate(stream, VLLM)
    cut = simulate(stream, VLLM, stop_at_s=horizon)
    assert 0.0 < full.summary.attainment < 0.9
    assert cut.summary.truncated and cut.run.end_s < full.run.end_s
    assert cut.summary.attainment == full.summary.attainment


def test_early_failure_is_a_lower_bound():
    load = make_workload("chat")
    p = probe(load, 30.0, VLLM.with_(seed=5), duration_s=20.0)
    full = simulate(load.generate(30.0, 20.0, 5), VLLM)
    assert not p.exact and not p.meets(0.9)
    assert p.attainment <= full.summary.attainment


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": 0.0}, "target"),
        ({"rel_tol": 0.0}, "rel_tol"),
        ({"rel_tol": 1e-300}, "rel_tol must be at least 1e-06"),
        ({"rel_tol": math.nan}, "rel_tol"),
        ({"max_rps": 0.5}, "max_rps"),
    ],
)
def test_capacity_validation(kwargs, message, monkeypatch):
    # refused before a single rate is simulated, by a search and by a grid alike
    capacity_module = importlib.import_module("schedlab.serving.capacity")
    monkeypatch.setattr(capacity_module, "probe", None)
    monkeypatch.setattr(capacity_module, "run_jobs", None)
    with pytest.raises(ServingError, match=message):
        capacity("chat", VLLM, **kwargs)
    with pytest.raises(ServingError, match=message):
        capacity_grid("chat", ["vllm"], VLLM, **kwargs)


def test_bisection_ends_between_adjacent_floats():
    # Below the spacing of floats no rate lies between lo and hi: the search stops there
    # instead of testing the same rate for ever.
    capacity_module = importlib.import_module("schedlab.serving.capacity")
    tested: list[float] = []

    def meets(rate: float) -> bool:
        assert len(tested) < 200, "the bisection does not end"
        tested.append(rate)
        return rate <= 3.0

    lo, hi = capacity_module._bisect(meets, 1.0, 1000.0, 0.1, 1e-300)
    assert lo == 3.0 and hi == math.nextafter(3.0, math.inf)


def test_sweep_is_deterministic_across_worker_counts():
    base = VLLM.with_(seed=1)
    one = sweep(
        "chat",
        ["vllm", "fixed:256"],
        [2.0, 8.0],
        base,
        duration_s=10.0,
        executor=Executor(workers=1),
    )
    two = sweep(
        "chat",
        ["vllm", "fixed:256"],
        [2.0, 8.0],
        base,
        duration_s=10.0,
        executor=Executor(workers=2),
    )
    assert [p.row() for p in one] == [p.row() for p in two]
    assert [(p.policy, p.rate_rps) for p in one] == [
        ("vllm", 2.0),
        ("vllm", 8.0),
        ("fixed:256", 2.0),
        ("fixed:256", 8.0),
    ]
    assert not math.isnan(one[0].summary.attainment)


def test_a_capacity_grid_is_each_search_in_order():
    base = VLLM.with_(policy="fixed:256")
    grid = capacity_grid(
        "chat", ["fixed:256", "vllm"], base, seeds=[0, 2], duration_s=10.0, max_rps=30.0
    )
    assert [(r.policy, r.seed) for r in grid] == [
        ("fixed:256", 0),
        ("fixed:256", 2),
        ("vllm", 0),
        ("vllm", 2),
    ]
    alone = capacity("chat", base.with_(seed=2), duration_s=10.0, max_rps=30.0)
    assert grid[1].to_dict() == alone.to_dict()


def test_a_failed_point_is_reported_after_the_others_ran(monkeypatch):
    # the module, not the function schedlab.serving re-exports under its name
    capacity_module = importlib.import_module("schedlab.serving.capacity")
    real = capacity_module.simulate

    def flaky(workload, scenario, **kwargs):
        if kwargs["rate"] == 3.0:
            raise RuntimeError("the simulator broke")
        return real(workload, scenario, **kwargs)

    monkeypatch.setattr(capacity_module, "simulate", flaky)
    with pytest.raises(GridError, match=r"2 of 4 jobs failed; first: vllm at 3 req/s") as info:
        sweep(
            "chat",
            ["vllm", "fixed:256"],
            [2.0, 3.0],
            VLLM,
            duration_s=5.0,
            executor=Executor(backend="serial"),
        )
    assert [(p.policy, p.rate_rps) for p in info.value.done] == [
        ("vllm", 2.0),
        ("fixed:256", 2.0),
    ]
    assert info.value.failed[1:] == ["fixed:256 at 3 req/s: RuntimeError: the simulator broke"]


def test_bad_names_are_refused_before_any_job_runs():
    with pytest.raises(UnknownNameError, match="unknown policy"):
        capacity_grid("chat", ["vllm", "magic"], VLLM)
    with pytest.raises(UnknownNameError, match="workload"):
        sweep("chatt", ["vllm"], [1.0], VLLM)


def test_a_point_is_keyed_by_the_trace_it_reads_not_its_path(tmp_path):
    trace = tmp_path / "trace.jsonl"
    rows = [(1000 * k, 50, 4) for k in range(10)]

    def write(rows):
        trace.write_text(
            "".join(
                f'{{"timestamp": {t}, "input_length": {p}, "output_length": {o}}}\n'
                for t, p, o in rows
            )
        )

    write(rows)
    results = tmp_path / "r.jsonl"
    first = sweep(
        str(trace), ["vllm"], [1.0], VLLM, duration_s=20.0, executor=Executor(results=results)
    )
    write(rows[:5])  # the same path, another trace: the stored point must not come back
    second = sweep(
        str(trace), ["vllm"], [1.0], VLLM, duration_s=20.0, executor=Executor(results=results)
    )
    assert first[0].summary.n_requests == 10 and second[0].summary.n_requests == 5


@pytest.mark.parametrize(
    "tamper",
    [
        lambda value: {},
        lambda value: [1, 2],
        lambda value: "x",
        lambda value: {**value, "attainment": "high"},  # printed as it was, once
        lambda value: {**value, "ttft": {**value["ttft"], "p99": [1]}},
        # in range, or refused: a forged attainment of 9.99 was printed as it was
        lambda value: {**value, "attainment": 9.99},
        lambda value: {**value, "attainment": -0.5},
        lambda value: {**value, "ttft": {**value["ttft"], "p99": -1.0}},
        lambda value: {**value, "end_s": 1e300 * 1e300},  # written 1e400 below
        lambda value: {**value, "n_requests": -3},
        lambda value: {**value, "preemptions": 2.5},
        lambda value: {**value, "policy_stats": {"misses": -1}},
    ],
)
def test_a_results_line_that_holds_no_result_is_refused_in_one_line(tmp_path, tamper):
    results = tmp_path / "r.jsonl"
    sweep("chat", ["vllm"], [2.0], VLLM, duration_s=5.0, executor=Executor(results=results))
    line = json.loads(results.read_text())
    text = json.dumps({**line, "value": tamper(line["value"])})
    results.write_text(text.replace("Infinity", "1e400") + "\n")  # JSON, read as inf
    with pytest.raises(
        FormatError, match=r"r\.jsonl:1: the line of vllm at 2 req/s does not hold a true"
    ):
        sweep("chat", ["vllm"], [2.0], VLLM, duration_s=5.0, executor=Executor(results=results))


def test_a_forged_capacity_read_back_is_refused(tmp_path):
    results = tmp_path / "r.jsonl"
    search = {"duration_s": 20.0, "rel_tol": 0.5, "executor": Executor("serial", results=results)}
    honest = capacity_grid("chat", ["vllm"], VLLM, **search)
    assert capacity_grid("chat", ["vllm"], VLLM, **search) == honest  # resumed as it was
    line = json.loads(results.read_text())
    line["value"]["probes"][0]["attainment"] = 1.5
    results.write_text(json.dumps(line) + "\n")
    with pytest.raises(FormatError, match=r"r\.jsonl:1: .*attainment: must be in \[0, 1\]"):
        capacity_grid("chat", ["vllm"], VLLM, **search)


def test_a_rate_or_seed_given_twice_is_refused():
    with pytest.raises(ServingError, match="rate given twice"):
        sweep("chat", ["vllm"], [4.0, 4.0], VLLM)
    with pytest.raises(ServingError, match="seed given twice"):
        capacity_grid("chat", ["vllm"], VLLM, seeds=[0, 0])
