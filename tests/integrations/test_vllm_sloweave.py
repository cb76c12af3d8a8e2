"""SLOWeave as a vLLM scheduler class: its deadline guarantee inside vLLM's own loop, and
the ways a real server loads and configures it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("vllm")

from schedlab.errors import ServingError
from schedlab.integrations.vllm import SLOWeaveScheduler, VllmSetup, build_scheduler
from schedlab.serving.cost_model import BatchShape, batch_time
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from schedlab.serving.workloads import RequestStream


@st.composite
def runs(draw: st.DrawFn):
    n = draw(st.integers(2, 24))
    arrival = np.cumsum(draw(st.lists(st.integers(0, 60), min_size=n, max_size=n))) * 0.005
    stream = RequestStream(
        "deadlines",
        arrival.astype(float),
        np.asarray(draw(st.lists(st.integers(1, 3000), min_size=n, max_size=n))),
        np.asarray(draw(st.lists(st.integers(1, 60), min_size=n, max_size=n))),
        float(arrival[-1]) + 1.0,
    )
    engine = EngineConfig(
        kv_tokens=draw(st.sampled_from([4096, 16384, 65536])),
        max_num_seqs=draw(st.integers(1, 32)),
        max_num_batched_tokens=draw(st.sampled_from([512, 2048, 8192])),
        prefix_caching=draw(st.booleans()),
    )
    scenario = Scenario(
        policy=draw(st.sampled_from(["sloweave", "sloweave-kv", "sloweave:1024"])),
        engine=engine,
        engine_kind="vllm",
        slo=SLO(ttft_s=5.0, tpot_s=draw(st.sampled_from([0.01, 0.015, 0.025]))),
        margin_s=draw(st.sampled_from([None, 0.0, 0.001])),
    )
    return stream, scenario


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(runs())
def test_every_step_keeps_the_deadline_a_decode_only_step_would(case) -> None:
    """In vLLM's loop, every step with decodes whose decode-only batch meets the next-token
    deadline (the last step's end plus the TPOT target, less the margin) is predicted to
    meet it too (``proofs/sloweave.md``)."""
    stream, scenario = case
    run = run_engine(
        stream,
        scenario.with_(engine=EngineConfig(**{**scenario.engine.__dict__})),
        record_batches=True,
    )
    model = scenario.predicted()
    margin = model.margin_s if scenario.margin_s is None else scenario.margin_s
    checked = 0
    for before, step in zip(run.batches, run.batches[1:], strict=False):
        shape = step.shape
        assert shape is not None
        if not shape.n_decode:
            continue
        budget = before.end_s + scenario.slo.tpot_s - margin - step.start_s
        alone = BatchShape(
            shape.n_decode, shape.decode_kv, (), shape.decode_kv_max, shape.decode_kv_min
        )
        if batch_time(model, alone) <= budget:
            assert batch_time(model, shape) <= budget + 1e-12, (step, budget)
            checked += 1
    assert all(r.finished for r in run.records)
    assert checked or not any(b.shape.n_decode for b in run.batches)  # type: ignore[union-attr]


def test_vllms_scheduler_cls_option_loads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--scheduler-cls schedlab.integrations.vllm.SLOWeaveScheduler`` resolves to the
    class through vLLM's own lookup, and the environment configures it."""
    from vllm.config import SchedulerConfig

    config = SchedulerConfig(
        max_model_len=4096,
        is_encoder_decoder=False,
        scheduler_cls="schedlab.integrations.vllm.SLOWeaveScheduler",
    )
    assert config.get_scheduler_cls() is SLOWeaveScheduler
    monkeypatch.setenv("SCHEDLAB_SLOWEAVE_COST_MODEL", "sloweave-default")
    monkeypatch.setenv("SCHEDLAB_SLOWEAVE_TPOT_S", "0.02")
    monkeypatch.setenv("SCHEDLAB_SLOWEAVE_POLICY", "sloweave-kv")
    scheduler = build_scheduler(VllmSetup(EngineConfig(), policy="sloweave"))
    assert scheduler.planner.name == "sloweave-kv:4096"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SCHEDLAB_SLOWEAVE_COST_MODEL": "nosuch"}, "nosuch"),
        (
            {"SCHEDLAB_SLOWEAVE_COST_MODEL": "sloweave-default", "SCHEDLAB_SLOWEAVE_TPOT_S": "x"},
            "SCHEDLAB_SLOWEAVE_TPOT_S: not a number",
        ),
        (
            {
                "SCHEDLAB_SLOWEAVE_COST_MODEL": "sloweave-default",
                "SCHEDLAB_SLOWEAVE_POLICY": "sarathi",
            },
            "vllm, or sloweave or sloweave-kv",
        ),
    ],
)
def test_a_bad_configuration_is_one_line(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(Exception, match=message) as caught:
        build_scheduler(VllmSetup(EngineConfig(), policy="sloweave"))
    assert len(str(caught.value).splitlines()) == 1


def test_unconfigured_or_asynchronous_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCHEDLAB_SLOWEAVE_COST_MODEL", raising=False)
    with pytest.raises(ServingError, match="set SCHEDLAB_SLOWEAVE_COST_MODEL") as caught:
        build_scheduler(VllmSetup(EngineConfig(), policy="sloweave"))
    assert len(str(caught.value).splitlines()) == 1
    with pytest.raises(ServingError, match="--no-async-scheduling"):
        build_scheduler(VllmSetup(EngineConfig(async_scheduling=True), policy="sloweave"))


def test_which_policies_vllm_runs_comes_from_their_specs():
    from schedlab.integrations.vllm.sloweave import check_policy, vllm_policies
    from schedlab.serving.policy_registry import POLICIES

    assert vllm_policies() == ("sloweave", "sloweave-kv")
    with pytest.raises(ServingError, match="runs vllm, or sloweave or sloweave-kv"):
        check_policy("sarathi")
    # a policy of a user's own that says vLLM's budget reproduces its plans is run
    mine = dataclasses.replace(POLICIES["sloweave"])
    with POLICIES.temporarily("mine", mine):
        assert check_policy("mine:512") == "mine:512"
    with (
        POLICIES.temporarily("mine", dataclasses.replace(mine, in_vllm=False)),
        pytest.raises(ServingError, match="policy 'mine'"),
    ):
        check_policy("mine")
