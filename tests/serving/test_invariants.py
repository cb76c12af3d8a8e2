"""Simulator invariants over random runs (``tests/serving/random_runs.py``): streams,
engines, policies of the registry and scenarios drawn from fixed seeds (the short run of
CI; ``python benchmarks/fuzz.py`` runs hundreds), and the checks shown to fail on a run
that loses a token or overfills its KV cache."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tests.serving.random_runs as random_runs
from schedlab.serving.simulator import run_engine
from tests.serving.random_runs import check_case, random_case


def test_random_runs_keep_the_invariants() -> None:
    cases = [random_case(np.random.default_rng(seed)) for seed in range(40)]
    runs = [check_case(case) for case in cases]
    # each behaviour the invariants must survive was drawn
    assert any(r.preemptions for run in runs for r in run.records)
    assert any(not r.finished for run in runs for r in run.records)
    assert any(run.reused_tokens for run in runs)
    assert any(c.scenario.replicas == 2 for c in cases)
    assert {c.scenario.engine.async_scheduling for c in cases} == {True, False}
    assert {c.scenario.engine.prefix_caching for c in cases} == {True, False}
    assert len({c.scenario.policy.split(":")[0] for c in cases}) == len(
        random_runs.POLICIES.entries()
    )


def _case_with_tokens(seed: int = 0) -> random_runs.Case:
    for k in range(seed, seed + 100):
        case = random_case(np.random.default_rng(k))
        if case.stop_at_s is None and int(case.stream.output.max()) > 1:
            return case
    raise AssertionError("no case drawn")


def test_a_lost_token_is_caught(monkeypatch) -> None:
    def losing(*args, **kwargs):  # type: ignore[no-untyped-def]
        run = run_engine(*args, **kwargs)
        i = int(np.argmax(args[0].output))
        (first, last), *rest = run.records[i].segments
        records = list(run.records)
        records[i] = dataclasses.replace(records[i], segments=((first, last - 1), *rest))
        return dataclasses.replace(run, records=tuple(records))

    monkeypatch.setattr(random_runs, "run_engine", losing)
    with pytest.raises(AssertionError, match=r"request \d+ tokens"):
        check_case(_case_with_tokens())


def test_an_overfull_cache_is_caught(monkeypatch) -> None:
    def overfull(*args, **kwargs):  # type: ignore[no-untyped-def]
        run = run_engine(*args, **kwargs)
        blocks = args[1].engine.total_blocks + 1
        batches = (dataclasses.replace(run.batches[0], used_blocks=blocks), *run.batches[1:])
        return dataclasses.replace(run, batches=batches)

    monkeypatch.setattr(random_runs, "run_engine", overfull)
    with pytest.raises(AssertionError, match="used_blocks"):
        check_case(_case_with_tokens())
