"""Engine behaviour the replay of real runs relies on: vLLM's asynchronous scheduling,
and the longest and shortest decode handed to ``decode_spread`` cost models."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from tests.serving.streams import FLAT, MS, ms_stream


def simulate(requests, *, seqs=8, async_scheduling, model=FLAT, kv=1024):
    config = EngineConfig(
        kv_tokens=kv,
        max_num_seqs=seqs,
        max_num_batched_tokens=64,
        async_scheduling=async_scheduling,
    )
    scenario = Scenario("vllm", model, SLO(5.0, 0.025), config)
    return run_engine(requests, scenario, record_batches=True)


def first_tokens_ms(run):
    return [round(r.first_token_s / MS, 6) for r in run.records]


def finishes_ms(run):
    return [round(r.finish_s / MS, 6) for r in run.records]


def test_async_arrival_waits_one_more_iteration():
    # A (prompt 10, output 5) arrives at 0 on an idle engine: prefill [0, 10], decodes until
    # 50. B (prompt 10, output 2) arrives at 5, while iteration 0 runs.
    # Synchronous: B is prefilled in iteration 1 [10, 20]: first token 20, last 30.
    # Async: iteration 1 was planned when iteration 0 started, so B joins iteration 2
    # [20, 30]: first token 30, last 40. A is not delayed (no lag on an idle engine).
    requests = ms_stream([0, 5], [10, 10], [5, 2])
    sync = simulate(requests, async_scheduling=False)
    lagged = simulate(requests, async_scheduling=True)
    assert first_tokens_ms(sync) == [10, 20] and finishes_ms(sync) == [50, 30]
    assert first_tokens_ms(lagged) == [10, 30] and finishes_ms(lagged) == [50, 40]


def test_async_freed_seat_is_used_one_iteration_later():
    # Two seats. A (10, output 2) and C (10, output 10) arrive at 0 and are prefilled in
    # [0, 10]; A decodes in [10, 20] and finishes at 20. B (10, output 1) arrives at 1.
    # Synchronous: B takes A's seat in iteration 2 [20, 30] and finishes at 30.
    # Async: iteration 2 was planned at 10, when A still held its seat: B runs in
    # iteration 3 [30, 40]. C decodes throughout (100 ms for its 9 decodes after 10).
    requests = ms_stream([0, 0, 1], [10, 10, 10], [2, 10, 1])
    sync = simulate(requests, seqs=2, async_scheduling=False)
    lagged = simulate(requests, seqs=2, async_scheduling=True)
    assert finishes_ms(sync) == [20, 100, 30]
    assert finishes_ms(lagged) == [20, 100, 40]
    assert [b.chunks for b in lagged.batches[2:4]] == [(), ((2, 10),)]


def test_async_empty_lagged_batch_starts_at_once():
    # A (10, output 1) runs [0, 10] and finishes; B arrives at 5. The batch planned at 0 for
    # the next iteration is empty, so the real engine schedules B right after A's output:
    # B runs [10, 20] in both modes, and the engine never idles while work is queued.
    requests = ms_stream([0, 5], [10, 10], [1, 1])
    for mode in (False, True):
        assert finishes_ms(simulate(requests, async_scheduling=mode)) == [10, 20]


class Recorder:
    """A flat 10 ms model that records what the engine passes (``decode_spread``)."""

    name = "recorder"
    margin_s = 0.0
    decode_spread = True

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, list, int | None]] = []
        self.least: list[int | None] = []

    def iteration_time(
        self, n_decode, decode_kv, chunks, *, decode_kv_max=None, decode_kv_min=None
    ):
        self.calls.append((n_decode, decode_kv, list(chunks), decode_kv_max))
        self.least.append(decode_kv_min)
        return 10 * MS

    def to_dict(self):
        return {"kind": "recorder"}


def test_longest_decode_is_passed_by_hand():
    # A (prompt 10, output 4) and B (prompt 30, output 3) are prefilled together. Then the
    # decodes hold prompt + generated tokens: iteration 1: 11 and 31 (max 31, total 42);
    # iteration 2: 12 and 32; B finishes, iteration 3: A alone with 13.
    model = Recorder()
    simulate(ms_stream([0, 0], [10, 30], [4, 3]), async_scheduling=False, model=model)
    assert model.calls == [
        (0, 0, [(10, 0), (30, 0)], None),
        (2, 42, [], 31),
        (2, 44, [], 32),
        (1, 13, [], 13),
    ]
    assert model.least == [None, 11, 12, 13]  # the shortest decode's KV


@settings(max_examples=30, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.integers(0, 40), st.integers(1, 60), st.integers(1, 30)),
        min_size=1,
        max_size=12,
    ),
    mode=st.booleans(),
)
def test_longest_decode_matches_the_batches(data, mode):
    # Reconstruct every decode's KV from the recorded batches (prompt + tokens generated so
    # far; a completed prefill emits one token; a resumed request starts from what it took
    # back from the prefix cache) and compare with what the engine passed.
    # The small KV capacity forces preemptions and recomputation.
    data.sort()
    requests = ms_stream(*zip(*data, strict=True))
    model = Recorder()
    run = simulate(requests, seqs=4, async_scheduling=mode, model=model, kv=160)
    generated: dict[int, int] = defaultdict(int)
    done: dict[int, int] = defaultdict(int)
    prompts = requests.prompt
    assert len(model.calls) == len(run.batches)
    calls = zip(run.batches, model.calls, model.least, strict=True)
    for batch, (n, kv, _, longest), least in calls:
        for j in batch.preempted:
            done[j] = 0
        held = [int(prompts[j]) + generated[j] for j in batch.decodes]
        assert n == len(held) and kv == sum(held)
        assert longest == (max(held) if held else None)
        assert least == (min(held) if held else None)
        for j in batch.decodes:
            generated[j] += 1
        for j, tokens in batch.reused:  # a resumed request takes back its cached KV
            done[j] = tokens
        for j, c in batch.chunks:
            done[j] += c
            if done[j] == int(prompts[j]) + generated[j]:
                generated[j] += 1
                done[j] = 0
