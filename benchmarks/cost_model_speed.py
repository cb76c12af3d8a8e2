"""The calibrated cost model's speed: one call, compiled and in Python, and what it costs a
simulation per iteration against the simple model (issue 53).

1. **One call.** The batch shapes a real simulation asks for are recorded (the ``chat``
   workload at 6 req/s for 120 s, seed 3, ``sloweave``, on each calibrated model), and
   every one is timed through ``iteration_time`` of: the calibrated model (compiled, the
   default), its Python reference (``reference_time``), and the simple model
   ``sloweave-default``; mean µs a call over all shapes, median of ``--repeats`` passes.
   The calibrated models are the shipped ones and, where ``../shared/data`` (or
   ``SCHEDLAB_DATA``) has the profiles, the Qwen3-30B-A3B mixture-of-experts profile
   calibrated here at tp1.
2. **Per iteration, paired.** The same simulation, the policy built before the clock
   starts (its one-off monotonicity check is outside), run alternately with the simple
   and the shipped calibrated model, ``--repeats`` times each: median µs an iteration and
   their ratio. Two pairs:

   * *the issue's run*: ``sloweave-default`` against the calibrated model on the same
     request stream. The two models give different iterations: the calibrated one's are
     slower on the simulated clock, so its queue holds prefill work at almost every
     iteration (and SLOWeave searches a chunk), where most of the simple model's
     iterations are decode-only. The share of iterations that searched is printed, and
     whether the queue grows through the window with each model
     (:func:`schedlab.serving.metrics.queue_growth`).
   * *the same load*: against a ``linear-attention`` model fitted by least squares to the
     calibrated model's times on the recorded shapes, so both runs carry like batches,
     and the ratio is what the cost model itself adds;
   * *saturated*: ``sloweave-default`` against the calibrated model on
     ``benchmarks/simulator_speed.py``'s ``churn-128`` load, where both keep the engine
     full.
3. **Whole command**: ``schedlab simulate`` of that run, with each model, as a process
   (median of ``--repeats``), which includes the start-up, the cost model's load and the
   policy's monotonicity check.

Run: ``python benchmarks/cost_model_speed.py`` (``--page docs/cost-model-speed.md``
writes the results page). Wall times on a shared 2-core machine: noisy; the ratios are of
runs made alternately.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.calibration import shipped_model_path
from schedlab.serving.cost_model import (
    SLOWEAVE_DEFAULT,
    CostModel,
    LinearAttentionCostModel,
    get_cost_model,
)
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import queue_growth
from schedlab.serving.scenario import DEPLOYED_ENGINE, Scenario
from schedlab.serving.simulator import run_engine
from schedlab.serving.workloads import RequestStream, make_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import command_line, tee_page

SHIPPED = ("rtxpro6000_llama-3.1-8b", "rtx4090_llama-3.1-8b")
RUN = ("chat", 6.0, 120.0, 3)  # workload, rate, window, seed
MOE = Path("profiles/llmservingsim/RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16")

Shape = tuple[int, int, tuple[tuple[int, int], ...], Any, Any]


#: ``benchmarks/simulator_speed.py``'s ``churn-128``: ``chat`` arriving faster than the
#: engine serves, 128 running requests at most.
CHURN_TEXT = "`chat` at 40 req/s for 60 s, seed 0, `max_num_seqs` 128 (the simulator-speed load)"
CHURN_ENGINE = EngineConfig(kv_tokens=2**22, max_num_seqs=128, max_num_batched_tokens=2048)


def churn_stream() -> RequestStream:
    return make_workload("chat").generate(40.0, 60.0, 0)


class _Recorder:
    """A calibrated model that records every batch it times."""

    def __init__(self, model: Any) -> None:
        self.name, self.margin_s, self.decode_spread = model.name, model.margin_s, True
        self._model, self.shapes = model, []

    def iteration_time(self, n, kv, chunks, *, decode_kv_max=None, decode_kv_min=None):
        self.shapes.append((n, kv, tuple(chunks), decode_kv_max, decode_kv_min))
        return self._model.iteration_time(
            n, kv, chunks, decode_kv_max=decode_kv_max, decode_kv_min=decode_kv_min
        )

    def to_dict(self) -> dict[str, Any]:
        return self._model.to_dict()


def stream() -> RequestStream:
    workload, rate, window, seed = RUN
    return make_workload(workload).generate(rate, window, seed)


def recorded_shapes(model: Any) -> list[Shape]:
    """Every batch the simulation times (the search's probes too)."""
    recorder = _Recorder(model)
    run_engine(stream(), Scenario("sloweave", recorder))  # type: ignore[arg-type]
    return recorder.shapes


def call_us(call: Any, shapes: list[Shape], repeats: int) -> float:
    """Median over passes of the mean µs a call."""
    passes = []
    for _ in range(repeats):
        began = time.perf_counter()
        for n, kv, chunks, longest, least in shapes:
            call(n, kv, chunks, decode_kv_max=longest, decode_kv_min=least)
        passes.append((time.perf_counter() - began) / len(shapes) * 1e6)
    return statistics.median(passes)


def simple_call(model: CostModel) -> Any:
    return lambda n, kv, chunks, **_: model.iteration_time(n, kv, chunks)


def fitted_linear(model: Any, shapes: list[Shape]) -> LinearAttentionCostModel:
    """The ``linear-attention`` model nearest (least squares) to ``model`` on ``shapes``."""
    rows, target = [], []
    for n, kv, chunks, longest, least in shapes:
        tokens = sum(c for c, _ in chunks)
        pairs = sum(c * (p + (c + 1) / 2) for c, p in chunks)
        rows.append([1.0, n > 0, n, kv, tokens > 0, tokens, pairs])
        target.append(
            model.iteration_time(n, kv, chunks, decode_kv_max=longest, decode_kv_min=least)
        )
    from scipy.optimize import nnls

    coef = nnls(np.asarray(rows, dtype=float), np.asarray(target))[0]
    names = ("base_s", "decode_fixed_s", "decode_per_seq_s", "decode_per_kv_s")
    names += ("prefill_fixed_s", "prefill_per_token_s", "prefill_attention_s")
    return LinearAttentionCostModel(
        name="fitted-linear", **dict(zip(names, coef.tolist(), strict=True))
    )


def loop_us(
    model: CostModel, requests: RequestStream, engine: EngineConfig
) -> tuple[float, float]:
    """µs an iteration of the run's loop (policy built first) and the share of
    iterations whose plan searched a chunk."""
    policy = Scenario("sloweave", model, engine=engine).build_policy()
    searched = 0
    plan = policy.plan

    def counting(view: Any) -> Any:
        nonlocal searched
        searched += view.has_prefill_work
        return plan(view)

    began = time.perf_counter()
    run = run_engine(requests, Scenario(policy, model, engine=engine))
    wall = time.perf_counter() - began
    iterations = run.iteration_end_s.size
    policy.plan = counting  # type: ignore[method-assign]
    run_engine(requests, Scenario(policy, model, engine=engine))
    return wall / iterations * 1e6, searched / iterations


def paired(
    a: CostModel,
    b: CostModel,
    repeats: int,
    requests: RequestStream,
    engine: EngineConfig = DEPLOYED_ENGINE,
) -> tuple[float, float, float, float]:
    """Median µs an iteration with ``a`` and with ``b``, run alternately, and the shares
    of iterations that searched a chunk."""
    times: dict[int, list[float]] = {0: [], 1: []}
    shares = [0.0, 0.0]
    for _ in range(repeats):
        for k, model in enumerate((a, b)):
            us, shares[k] = loop_us(model, requests, engine)
            times[k].append(us)
    return statistics.median(times[0]), statistics.median(times[1]), shares[0], shares[1]


def command_seconds(model: str, repeats: int) -> float:
    workload, rate, window, seed = RUN
    argv = [sys.executable, "-m", "schedlab", "simulate", "--workload", workload]
    argv += ["--rate", f"{rate:g}", "--duration", f"{window:g}s", "--seed", str(seed)]
    argv += ["--cost-model", model, "--json"]
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def calibrated_models() -> dict[str, Any]:
    models = {name: get_cost_model(str(shipped_model_path(name))) for name in SHIPPED}
    data = Path(
        os.environ.get("SCHEDLAB_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    if (data / MOE).is_dir():
        from schedlab.calibration.fit import calibrate

        model = calibrate(data / MOE, "Qwen/Qwen3-30B-A3B-Instruct-2507")[0]
        models[model.name] = model
    return models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--page", type=Path, default=None, help="also write a results page")
    args = parser.parse_args()
    command = command_line("cost_model_speed.py", sys.argv[1:])
    workload, rate, window, seed = RUN
    run_text = f"`{workload}` at {rate:g} req/s for {window:g} s, seed {seed}, `sloweave`"
    with tee_page(args.page, "The calibrated cost model's speed", command):
        print(f"One call ({run_text}: the batch shapes its simulation times)\n")
        head = f"{'model':<40}{'shapes':>8}{'compiled':>11}{'Python':>11}{'simple':>10}"
        print(f"{head}{'x simple':>10}")
        for name, model in calibrated_models().items():
            shapes = recorded_shapes(model)
            compiled = call_us(model.iteration_time, shapes, args.repeats)
            python = call_us(model.reference_time, shapes, max(1, args.repeats // 2))
            simple = call_us(simple_call(SLOWEAVE_DEFAULT), shapes, args.repeats)
            print(
                f"{name:<40}{len(shapes):>8,}{compiled:>9.2f}us{python:>9.2f}us{simple:>8.2f}us"
                f"{compiled / simple:>9.2f}x",
                flush=True,
            )
        print("\nmean µs a call over the shapes, median of the passes\n")
        calibrated = get_cost_model(SHIPPED[0])
        fitted = fitted_linear(calibrated, recorded_shapes(calibrated))
        print(f"Per iteration, paired ({run_text}, the loop only)\n")
        head = f"{'simple model':<20}{'simple':>10}{'calibrated':>12}{'ratio':>8}"
        print(f"{head}   iterations that searched a chunk")
        pairs = (
            ("sloweave-default", SLOWEAVE_DEFAULT, stream(), DEPLOYED_ENGINE),
            ("fitted-linear", fitted, stream(), DEPLOYED_ENGINE),
            ("churn-128", SLOWEAVE_DEFAULT, churn_stream(), CHURN_ENGINE),
        )
        for label, simple, requests, engine in pairs:
            a, b, share_a, share_b = paired(simple, calibrated, args.repeats, requests, engine)
            print(
                f"{label:<20}{a:>8.2f}us{b:>10.2f}us{b / a:>7.2f}x   "
                f"{share_a:.1%} (simple), {share_b:.1%} ({calibrated.name})",
                flush=True,
            )
        print()
        requests = stream()
        for model in (SLOWEAVE_DEFAULT, calibrated):
            records = run_engine(requests, Scenario("sloweave", model)).records
            growth = queue_growth(records)
            grows = "no" if growth is None else f"from {growth[0]:g} to {growth[1]:g} requests"
            print(f"queue growth through the window with {model.name}: {grows}")
        print(
            f"calibrated: `{calibrated.name}`; `fitted-linear`: a `linear-attention` model "
            "fitted by least squares to it on the run's batch shapes (the same load); "
            f"`churn-128`: `sloweave-default` on {CHURN_TEXT}, where both models keep the "
            f"engine full; median of {args.repeats} runs each, made alternately\n"
        )
        print(f"Whole command (`schedlab simulate`, {run_text})\n")
        for name in ("sloweave-default", SHIPPED[0]):
            print(f"{name:<40}{command_seconds(name, args.repeats):>8.2f} s", flush=True)
        print()
        print(f"median of {args.repeats} processes: start-up, the model's load and check included")


if __name__ == "__main__":
    main()
