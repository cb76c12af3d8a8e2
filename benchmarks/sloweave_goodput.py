"""SLOWeave's capacity against fixed chunk sizes, vLLM and Sarathi (issues 5 and 6).

For each workload (``mixed``, ``long``) and TPOT target, with TTFT <= 5 s and the default
engine (:class:`~schedlab.serving.engine_config.EngineConfig`) or that of a recorded run
(``--engine-from RUN``: e.g. the RTX 4090 run's 2,587 KV blocks, the KV-bound regime),
find each policy's
capacity: the highest Poisson rate whose SLO attainment is >= 90%
(:func:`schedlab.serving.capacity.capacity`). Policies: ``fixed:C`` for
C in {64, 128, 256, 512, 1024, 2048}, ``vllm``, ``sarathi`` (budget derived from the TPOT
target) and ``sloweave`` (margin delta = the cost model's ``margin_s``). Capacities are
averaged over the seeds; every seed is explicit.

``--cost-model`` chooses the model: ``sloweave-default`` (issue 5, the SLOWeave paper's
simulator model) or a shipped calibrated one (``rtxpro6000_llama-3.1-8b``,
``rtx4090_llama-3.1-8b``). The
calibrated model carries the profile's decode-KV skew correction: the simulator's actual
iteration time includes it (it knows the longest decode), while SLOWeave's chunk search
and Sarathi's budget evaluate the model for uniform decodes, as a real scheduler would.
A TPOT target below the model's one-decode iteration time is infeasible for every policy;
the script prints that time first (about 11 ms for the calibrated model, so use e.g.
``--tpots 25ms,50ms`` with it).

The SLOWeave paper (arXiv 2609.07883) reports goodput gains over the strongest fixed
chunk of +39% (mixed) and +38% (long context) at 25 ms, and 3.3x and 2.4x at 10 ms, with
its default model. Its workloads and engine settings are not available to us; this
benchmark uses ours unchanged (no tuning toward those figures).

Defaults: 3 seeds, 180 s arrival window, 2% bisection tolerance (about 9 minutes on 2
cores); ``--quick``: 1 seed, 120 s, 5% (about 1 minute).

Usage: python benchmarks/sloweave_goodput.py [--cost-model M] [--tpots 25ms,10ms] [--quick]
[--workers N] [--csv PATH]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from dataclasses import dataclass

from schedlab.calibration.deployment import deployment_of
from schedlab.calibration.recorded_run import read_recorded_run
from schedlab.cli.serving import parse_duration
from schedlab.errors import ServingError
from schedlab.serving.capacity import capacity, parallel_map
from schedlab.serving.cost_model import get_cost_model
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.scenario import Scenario

FIXED = (64, 128, 256, 512, 1024, 2048)
POLICIES = (*(f"fixed:{c}" for c in FIXED), "vllm", "sarathi", "sloweave")
WORKLOADS = ("mixed", "long")
TTFT_S = 5.0
#: The paper's gains over the best fixed chunk, with its default cost model.
PAPER = {
    ("mixed", 0.025): "+39%",
    ("long", 0.025): "+38%",
    ("mixed", 0.010): "3.3x",
    ("long", 0.010): "2.4x",
}


@dataclass(frozen=True)
class Task:
    workload: str
    tpot_s: float
    policy: str
    seed: int
    duration_s: float
    rel_tol: float
    cost_model: str
    engine: EngineConfig
    margin_s: float | None


def run(task: Task) -> tuple[Task, float, str]:
    scenario = Scenario(
        task.policy,
        task.cost_model,
        SLO(TTFT_S, task.tpot_s),
        task.engine,
        margin_s=task.margin_s,
        seed=task.seed,
    )
    try:
        result = capacity(
            task.workload,
            scenario,
            duration_s=task.duration_s,
            rel_tol=task.rel_tol,
            start_rps=1.0,
        )
    except ServingError as exc:  # e.g. sarathi: no token budget meets the target
        return task, 0.0, f"{task.policy} ({exc})"
    return task, result.capacity_rps, result.policy


def _label(workload: str, tpot_s: float) -> str:
    return f"{workload} {tpot_s * 1e3:g}ms"


def _ratio(value: float, base: float) -> str:
    return "inf" if base == 0 else f"{value / base:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost-model", default="sloweave-default", help="name or JSON path")
    parser.add_argument("--tpots", default="25ms,10ms", help="TPOT targets, comma-separated")
    parser.add_argument("--quick", action="store_true", help="1 seed, 120 s, 5%% tolerance")
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds (default 3)")
    parser.add_argument("--duration", type=float, default=None, help="arrival window, s")
    parser.add_argument("--workers", type=int, default=None, help="processes (all cores)")
    parser.add_argument("--csv", default=None, help="write every capacity as CSV")
    parser.add_argument(
        "--engine-from",
        default=None,
        metavar="RUN",
        help="the engine of a recorded run's deployment (limits, KV capacity, prefix "
        "caching, asynchronous scheduling), e.g. the RTX 4090 run for the KV-bound regime",
    )
    parser.add_argument(
        "--sloweave-margin",
        default=None,
        metavar="TIME",
        help="SLOWeave's margin delta, e.g. 0ms (default: the cost model's margin_s)",
    )
    args = parser.parse_args()
    margin = (
        None
        if args.sloweave_margin is None
        else parse_duration(args.sloweave_margin, "--sloweave-margin", allow_zero=True)
    )
    engine = (
        EngineConfig()
        if args.engine_from is None
        else deployment_of(read_recorded_run(args.engine_from)).engine
    )
    tpots = [parse_duration(x, "--tpots") for x in args.tpots.split(",")]
    seeds = args.seeds or (1 if args.quick else 3)
    duration = args.duration or (120.0 if args.quick else 180.0)
    rel_tol = 0.05 if args.quick else 0.02
    model = get_cost_model(args.cost_model)
    print(
        f"cost model {model.name}: one decode (512 KV tokens) takes "
        f"{model.iteration_time(1, 512, []) * 1e3:.2f} ms; margin delta "
        f"{model.margin_s * 1e3:.3f} ms"
        + ("" if margin is None else f", SLOWeave run with {margin * 1e3:g} ms")
        + f"\nengine {engine}"
    )
    tasks = [
        Task(w, d, p, s, duration, rel_tol, args.cost_model, engine, margin)
        for w in WORKLOADS
        for d in tpots
        for p in POLICIES
        for s in range(seeds)
    ]
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        elapsed = time.perf_counter() - started
        print(f"\r{done}/{total} capacity searches, {elapsed:.0f} s", end="", file=sys.stderr)

    results = parallel_map(run, tasks, workers=args.workers, progress=progress)
    print(file=sys.stderr)
    caps: dict[tuple[str, float, str], list[float]] = {}
    names: dict[tuple[str, float, str], str] = {}
    for task, cap, name in results:
        caps.setdefault((task.workload, task.tpot_s, task.policy), []).append(cap)
        names[(task.workload, task.tpot_s, task.policy)] = name
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["workload", "tpot_s", "policy", "resolved", "seed", "capacity_rps"])
            for task, cap, name in results:
                writer.writerow([task.workload, task.tpot_s, task.policy, name, task.seed, cap])
    mean = {k: statistics.mean(v) for k, v in caps.items()}
    print(
        f"capacity (req/s, attainment >= 90%, TTFT <= {TTFT_S:g} s), mean of {seeds} "
        f"seed(s), {duration:g} s arrival window, rel. tolerance {rel_tol:g}, "
        f"cost model {model.name}"
    )
    cols = [(w, d) for w in WORKLOADS for d in tpots]
    print(f"{'policy':<16}" + "".join(f"{_label(w, d):>14}" for w, d in cols))
    for p in POLICIES:
        cells = "".join(f"{mean[(w, d, p)]:>14.2f}" for w, d in cols)
        resolved = {names[(w, d, p)] for w, d in cols} - {p}
        print(f"{p:<16}{cells}" + (f"   ({', '.join(sorted(resolved))})" if resolved else ""))
    paper = model.name == "sloweave-default"
    print(
        f"\n{'setting':<14}{'sloweave':>10}{'best fixed':>16}{'ours':>8}"
        + (f"{'paper':>8}" if paper else "")
        + f"{'vs vllm':>9}{'vs sarathi':>12}"
    )
    for w, d in cols:
        best = max(FIXED, key=lambda c, w=w, d=d: mean[(w, d, f"fixed:{c}")])
        sw = mean[(w, d, "sloweave")]
        fixed = mean[(w, d, f"fixed:{best}")]
        best_text = f"{fixed:.2f} (C={best})"
        print(
            f"{_label(w, d):<14}{sw:>10.2f}{best_text:>16}{_ratio(sw, fixed):>8}"
            + (f"{PAPER.get((w, d), '-'):>8}" if paper else "")
            + f"{_ratio(sw, mean[(w, d, 'vllm')]):>9}{_ratio(sw, mean[(w, d, 'sarathi')]):>12}"
        )
    print(f"\nwall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
