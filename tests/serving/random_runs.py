"""Random simulator runs and the invariants every one must keep.

:func:`random_case` draws a request stream (hand-made lengths, half of them with system
prompts and conversations sharing prefixes, or the first requests of a registered
workload with their outputs clipped and its shared prefixes kept), an engine (block size,
a KV capacity from exactly the largest request up to plenty, so preemption is often
forced, seat and token limits, prefix caching, the full-prompt gate and asynchronous
scheduling each on or off), a policy of the registry spelled with or without its
argument, one or two replicas, noise, and sometimes a stop time that leaves requests
unfinished.
:func:`check_case` runs it with every iteration recorded and checks

* finished + unfinished = total, every request finished when nothing stopped the run;
* every finished request emitted exactly its output tokens, an unfinished one fewer;
* each request's token times non-decreasing, its first token after its arrival;
* every iteration's KV blocks in use (``BatchRecord.used_blocks``) within capacity;
* on a run to the end, the independent replay of :func:`schedlab.testing.check_conservation`
  (conservation of tokens and prefill, KV blocks held, limits).

A broken invariant raises ``AssertionError`` naming the case. Shared by
``tests/serving/test_invariants.py`` (a short seeded run) and ``benchmarks/fuzz.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import numpy as np

from schedlab.errors import ServingError
from schedlab.serving.cost_model import get_cost_model
from schedlab.serving.engine_config import BLOCK_SIZES, EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.policies import PolicyContext
from schedlab.serving.policy_registry import POLICIES, make_policy
from schedlab.serving.prefix import SharedPrefixModel
from schedlab.serving.scenario import DEFAULT_COST_MODEL, Scenario
from schedlab.serving.simulator import EngineRun, run_engine
from schedlab.serving.workloads import WORKLOADS, RequestStream, make_workload
from schedlab.testing import ServingRun, check_conservation
from tests.serving.streams import stream_of

#: The most requests, and the longest output, of a drawn stream (each run stays short).
MAX_REQUESTS = 30
MAX_OUTPUT = 200


@dataclass(frozen=True)
class Case:
    """One random run: the stream, the scenario and where it stops (``None``: the end)."""

    stream: RequestStream
    scenario: Scenario
    stop_at_s: float | None
    label: str


def _spellings(config: EngineConfig, tpot_s: float, argument: int) -> list[str]:
    """Every registered policy, bare and with ``argument``, in the spellings it builds
    from (a policy that refuses one, e.g. ``fixed`` without its chunk, is left out)."""
    context = PolicyContext(get_cost_model(DEFAULT_COST_MODEL), config, tpot_s)
    spellings = []
    for name in POLICIES.entries():
        for spelling in (name, f"{name}:{argument}"):
            try:
                make_policy(spelling, context)
            except ServingError:
                continue
            spellings.append(spelling)
    return spellings


def _stream(rng: np.random.Generator) -> RequestStream:
    if rng.random() < 0.5:
        n = int(rng.integers(1, MAX_REQUESTS + 1))
        gaps = rng.exponential(float(rng.choice([0.001, 0.02, 0.3])), n)
        stream = stream_of(
            np.cumsum(gaps),
            rng.integers(1, int(rng.choice([16, 300, 3000])), n),
            rng.integers(1, int(rng.choice([4, 60, MAX_OUTPUT])), n),
        )
        if rng.random() < 0.5:  # system prompts and conversations, shared while in use
            model = SharedPrefixModel(
                system_prompts=int(rng.integers(1, 4)),
                system_tokens=int(rng.integers(8, 300)),
                open_conversations=int(rng.integers(1, 6)),
                block_tokens=int(rng.choice([8, 16, 48])),
                max_prompt=4000,
            )
            prompt, prefix = model.apply(stream.prompt, rng)
            stream = dataclasses.replace(stream, prompt=prompt, prefix=prefix)
        return stream
    name = str(rng.choice(sorted(WORKLOADS.entries())))
    rate = float(rng.choice([1.0, 5.0, 20.0]))
    whole = make_workload(name).generate(rate, 40.0, int(rng.integers(1000)))
    k = min(len(whole), MAX_REQUESTS)
    if k == 0:
        return _stream(rng)
    prefix = None if whole.prefix is None else whole.prefix.subset(np.arange(len(whole)) < k)
    return RequestStream(
        name,
        whole.arrival_s[:k],
        whole.prompt[:k],
        np.minimum(whole.output[:k], MAX_OUTPUT),
        whole.duration_s,
        prefix,
    )


def random_case(rng: np.random.Generator) -> Case:
    """A random stream, engine, policy and scenario (the module's docstring)."""
    stream = _stream(rng)
    block = int(rng.choice([b for b in BLOCK_SIZES if b <= 32]))
    largest = int((stream.prompt + stream.output).max())
    factor = float(rng.choice([1.0, 1.3, 2.0, 4.0, 100.0]))  # 1: the largest just fits
    blocks = -(-int(largest * factor) // block) + 1
    seqs = int(rng.integers(1, 65))
    config = EngineConfig(
        kv_tokens=blocks * block,
        block_size=block,
        max_num_seqs=seqs,
        max_num_batched_tokens=seqs + int(rng.choice([0, 16, 512, 8192])),
        prefix_caching=bool(rng.random() < 0.5),
        reserve_full_prompt=bool(rng.random() < 0.5),
        async_scheduling=bool(rng.random() < 0.5),
    )
    tpot = float(rng.choice([0.01, 0.025, 0.1]))
    policy = str(rng.choice(_spellings(config, tpot, int(rng.choice([8, 64, 512])))))
    scenario = Scenario(
        policy,
        slo=SLO(5.0, tpot),
        engine=config,
        noise_cv=float(rng.choice([0.0, 0.3])),
        seed=int(rng.integers(1000)),
        replicas=int(rng.choice([1, 1, 2])),
    )
    stop = float(stream.arrival_s[-1]) * float(rng.random()) if rng.random() < 0.2 else None
    label = f"{stream.name} n={len(stream)} {policy} {config} {scenario.replicas} replica(s)"
    return Case(stream, scenario, stop, f"{label} noise={scenario.noise_cv} stop={stop}")


def check_case(case: Case) -> EngineRun:
    """Run ``case`` with its iterations recorded and assert the invariants."""
    stream, config = case.stream, case.scenario.engine
    run = run_engine(stream, case.scenario, stop_at_s=case.stop_at_s, record_batches=True)
    here = case.label
    assert len(run.records) == len(stream), here
    finished = [r for r in run.records if r.finished]
    unfinished = [r for r in run.records if not r.finished]
    assert len(finished) + len(unfinished) == len(stream), here
    if case.stop_at_s is None:
        assert not unfinished, f"{here}: {len(unfinished)} unfinished"
    for i, record in enumerate(run.records):
        times = [t for a, b in record.segments for t in run.iteration_end_s[a : b + 1]]
        if record.finished:
            assert len(times) == int(stream.output[i]), f"{here}: request {i} tokens"
            assert record.finish_s == times[-1], here
        else:
            assert len(times) < int(stream.output[i]), f"{here}: request {i} unfinished"
        assert all(x <= y for x, y in itertools.pairwise(times)), here
        if times:
            assert record.first_token_s == times[0] > stream.arrival_s[i], f"{here}: {i}"
        else:
            assert math.isnan(record.first_token_s), here
    for batch in run.batches:
        assert 0 <= batch.used_blocks <= config.total_blocks, f"{here}: {batch}"
    if case.stop_at_s is None:
        chunked = case.scenario.build_policy().chunked
        check_conservation(ServingRun(stream, case.scenario, run, chunked))
    return run
