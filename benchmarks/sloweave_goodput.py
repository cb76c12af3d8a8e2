"""SLOWeave and sloweave-kv against every fixed chunk, vLLM and Sarathi (issues 5, 6, 11).

For each workload, TPOT target and SLO kind (``every-token``, ``p99``, ``mean``;
:mod:`schedlab.serving.metrics`), with TTFT <= 5 s and the default engine (or a recorded
run's, ``--engine-from RUN``), the capacity of each policy: the highest Poisson rate whose
SLO attainment is >= 90 % (:func:`schedlab.serving.capacity.capacity`). Policies:
``sloweave``, ``sloweave-kv`` (exact output predictions), ``fixed:C`` for C in
{64, ..., 2048} (``fixed:2048`` is also the deployment default: vLLM's
``long_prefill_token_threshold`` left at a 2,048-token chunk), ``vllm`` and ``sarathi``
(its budget from the cost model and the target,
:func:`~schedlab.serving.policies.slo_token_budget`).

Every cell gives the mean capacity over the seeds and its spread (min-max), the
preemptions and the peak KV tokens of the run at capacity (mean over seeds), and the
capacity with a KV cache that never binds (16 M tokens; ``--no-kv-column`` skips it).
Beside each table: the fluid prediction (:mod:`schedlab.serving.fluid`, with the
engine's cache) when the cost model is linear — for fixed chunks their own fluid capacity
with the cache, for sloweave its λ* (which ignores the cache: past it SLOWeave preempts),
for sloweave-kv the best any policy reaches with the cache — and the goodput of every
policy at one offered rate, sloweave-kv's capacity. Results are cached by task in
``--cache`` (CSV), so an interrupted run resumes. ``--robustness 0.25,0.5,1`` adds
sloweave-kv with output predictions off by a seeded lognormal error of those CVs.

The SLOWeave paper (arXiv 2609.07883) reports goodput gains over the strongest fixed
chunk of +39 % (mixed) and +38 % (long context) at 25 ms, and 3.3x and 2.4x at 10 ms.
Its workloads and engine settings are not available to us; this benchmark uses ours
unchanged (no tuning toward those figures).

Defaults: workloads mixed, long, chat, bursty; 25 ms and 10 ms; 3 seeds; 180 s windows;
2 % bisection tolerance. ``--quick``: mixed only, every-token only, 1 seed, 60 s, 5 %.

Usage: python benchmarks/sloweave_goodput.py [--cost-model M] [--tpots 25ms,10ms]
[--kinds every-token,p99,mean] [--workloads ...] [--quick] [--workers N] [--cache PATH]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from schedlab.calibration.deployment import deployment_of
from schedlab.calibration.recorded_run import read_recorded_run
from schedlab.cli.durations import parse_duration
from schedlab.errors import ServingError
from schedlab.jobs import Executor, Job, run_jobs
from schedlab.progress import Progress
from schedlab.serving.capacity import capacity
from schedlab.serving.cost_model import get_cost_model
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.fluid import FluidLoad, Headroom, headroom
from schedlab.serving.metrics import SLO, SLO_KINDS
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import simulate
from schedlab.serving.workloads import make_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import command_line, tee_page

FIXED = (64, 128, 256, 512, 1024, 2048)
POLICIES = ("sloweave", "sloweave-kv", *(f"fixed:{c}" for c in FIXED), "vllm", "sarathi")
DEPLOYMENT_DEFAULT = "fixed:2048"
TTFT_S = 5.0
#: A KV cache that never binds (tokens).
UNBOUNDED_KV = 16_000_000
#: The paper's gains over the best fixed chunk, with its default cost model.
PAPER = {
    ("mixed", 0.025): "+39%",
    ("long", 0.025): "+38%",
    ("mixed", 0.010): "3.3x",
    ("long", 0.010): "2.4x",
}
FIELDS = (
    "workload",
    "tpot_s",
    "kind",
    "policy",
    "seed",
    "kv",
    "resolved",
    "capacity_rps",
    "preemptions",
    "peak_kv_tokens",
    "goodput_rps",
)


@dataclass(frozen=True)
class Task:
    workload: str
    tpot_s: float
    kind: str
    policy: str
    seed: int
    kv: str  # "engine", "unbounded", "goodput@R" (one offered rate R), "predict@V" (error CV)
    duration_s: float
    rel_tol: float
    cost_model: str
    engine: EngineConfig

    def key(self) -> tuple[str, str, str, str, str, str]:
        return (self.workload, f"{self.tpot_s:g}", self.kind, self.policy, str(self.seed), self.kv)

    def scenario(self) -> Scenario:
        engine = self.engine
        if self.kv == "unbounded":
            engine = replace(engine, kv_tokens=UNBOUNDED_KV)
        cv = float(self.kv.split("@")[1]) if self.kv.startswith("predict@") else 0.0
        return Scenario(
            self.policy,
            self.cost_model,
            SLO(TTFT_S, self.tpot_s, self.kind),
            engine,
            seed=self.seed,
            prediction_cv=cv,
        )


def run(task: Task) -> dict[str, object]:
    row: dict[str, object] = dict(zip(FIELDS[:6], task.key(), strict=True))
    try:
        if task.kv.startswith("goodput@"):
            rate = float(task.kv.split("@")[1])
            s = simulate(
                task.workload, task.scenario(), rate=rate, duration_s=task.duration_s
            ).summary
            row.update(
                resolved=s.policy,
                capacity_rps="",
                preemptions=s.preemptions,
                peak_kv_tokens=s.peak_kv_tokens,
                goodput_rps=s.goodput_rps,
            )
            return row
        result = capacity(
            task.workload,
            task.scenario(),
            duration_s=task.duration_s,
            rel_tol=task.rel_tol,
            start_rps=1.0,
        )
    except ServingError as exc:  # e.g. sarathi: no token budget meets the target
        row.update(
            resolved=f"{task.policy} ({exc})",
            capacity_rps=0.0,
            preemptions=0,
            peak_kv_tokens=0,
            goodput_rps="",
        )
        return row
    at = result.at_capacity
    row.update(
        resolved=result.policy,
        capacity_rps=result.capacity_rps,
        preemptions=at.preemptions if at else 0,
        peak_kv_tokens=at.peak_kv_tokens if at else 0,
        goodput_rps="",
    )
    return row


def _read_cache(path: Path | None) -> dict[tuple[str, ...], dict[str, str]]:
    if path is None or not path.exists():
        return {}
    with path.open(encoding="utf-8") as handle:
        return {tuple(r[f] for f in FIELDS[:6]): r for r in csv.DictReader(handle)}


def _run_all(
    tasks: list[Task],
    cache: Path | None,
    workers: int | None,
    done: dict[tuple[str, ...], dict[str, str]],
) -> None:
    """Run the tasks not in ``done``, appending each batch of results to ``cache`` as it
    completes (so an interrupted run keeps what it finished)."""
    todo = [t for t in tasks if t.key() not in done]
    batch = 2 * (workers or os.cpu_count() or 1)
    with Progress("runs", len(todo)) as bar:
        for first in range(0, len(todo), batch):
            jobs = [Job("cell", asdict(task)) for task in todo[first : first + batch]]
            outcomes = run_jobs(_run_job, jobs, executor=Executor(workers=workers))
            failed = [o.error for o in outcomes if not o.ok]
            if failed:
                raise RuntimeError(f"benchmark cell failed: {failed[0]}")
            rows = [o.value for o in outcomes]
            bar(first + len(rows), len(todo))
            _store(rows, cache, done)


def _run_job(job: Job) -> dict[str, object]:
    """One cell of the benchmark, its task given as plain data."""
    params = dict(job.params)
    return run(Task(**{**params, "engine": EngineConfig(**params["engine"])}))


def _store(
    rows: list[dict[str, object]], cache: Path | None, done: dict[tuple[str, ...], dict[str, str]]
) -> None:
    """Add finished rows to ``done`` and append them to the ``cache`` file."""
    for row in rows:
        done[tuple(str(row[f]) for f in FIELDS[:6])] = {k: str(v) for k, v in row.items()}
    if cache is not None:
        new = not cache.exists()
        with cache.open("a", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            if new:
                writer.writeheader()
            writer.writerows(rows)


def _cells(done, w, d, kind, policy, seeds, kv="engine") -> list[dict[str, str]]:
    return [done[(w, f"{d:g}", kind, policy, str(s), kv)] for s in range(seeds)]


def _mean(rows: list[dict[str, str]], field: str) -> float:
    return statistics.mean(float(r[field] or 0.0) for r in rows)


def _ratio(value: float, base: float) -> str:
    return "inf" if base == 0 else f"{value / base:.2f}x"


def _fluid_cell(fluid: Headroom | None, policy: str) -> str:
    """The fluid prediction beside a policy's capacity (with the engine's cache)."""
    if fluid is None:
        return "-"
    if policy.startswith("fixed:"):
        chunk = int(policy.split(":")[1])
        return f"{next(f.kv_capacity_rps for f in fluid.fixed if f.chunk == chunk):.2f}"
    if policy == "sloweave":
        return f"{fluid.rate_star_rps:.2f}"
    if policy == "sloweave-kv":
        return f"{fluid.kv_bound_rps:.2f}"
    return "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost-model", default="sloweave-default", help="name or JSON path")
    parser.add_argument("--tpots", default="25ms,10ms", help="TPOT targets, comma-separated")
    parser.add_argument("--kinds", default=",".join(SLO_KINDS), help="SLO kinds")
    parser.add_argument("--workloads", default="mixed,long,chat,bursty", help="workloads")
    parser.add_argument("--quick", action="store_true", help="mixed, every-token, 1 seed, 60 s")
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds (default 3)")
    parser.add_argument("--duration", type=float, default=None, help="arrival window, s")
    parser.add_argument("--workers", type=int, default=None, help="processes (all cores)")
    parser.add_argument("--cache", default=None, help="CSV of finished runs (resumes)")
    parser.add_argument("--no-kv-column", action="store_true", help="skip unbounded KV")
    parser.add_argument(
        "--no-goodput", action="store_true", help="skip the goodput at one offered rate"
    )
    parser.add_argument(
        "--robustness",
        default=None,
        metavar="CVS",
        help="also run sloweave-kv with output predictions off by a lognormal error of "
        "these CVs (comma-separated, e.g. 0.25,0.5,1)",
    )
    parser.add_argument(
        "--engine-from",
        default=None,
        metavar="RUN",
        help="the engine of a recorded run's deployment",
    )
    parser.add_argument(
        "--page", type=Path, default=None, metavar="FILE", help="also write the output as a page"
    )
    args = parser.parse_args()
    with tee_page(
        args.page,
        "SLOWeave's capacity against fixed chunks, vLLM and Sarathi",
        command_line("sloweave_goodput.py", sys.argv[1:]),
    ):
        report(args)


def report(args: argparse.Namespace) -> None:
    """Run the grid ``args`` names and print its tables."""
    engine = (
        EngineConfig()
        if args.engine_from is None
        else deployment_of(read_recorded_run(args.engine_from)).engine
    )
    tpots = [parse_duration(x, "--tpots") for x in args.tpots.split(",")]
    kinds = ["every-token"] if args.quick else args.kinds.split(",")
    workloads = ["mixed"] if args.quick else args.workloads.split(",")
    for kind in kinds:
        SLO(5.0, 0.025, kind)  # refuses an unknown kind before hours of work
    seeds = args.seeds or (1 if args.quick else 3)
    duration = args.duration or (60.0 if args.quick else 180.0)
    rel_tol = 0.05 if args.quick else 0.02
    model = get_cost_model(args.cost_model)
    cache = None if args.cache is None else Path(args.cache)
    started = time.perf_counter()
    print(f"cost model {model.name}; engine {engine}")

    def task(w, d, kind, p, s, kv):
        return Task(w, d, kind, p, s, kv, duration, rel_tol, args.cost_model, engine)

    grid = [(w, d, kind) for kind in kinds for w in workloads for d in tpots]
    done = _read_cache(cache)
    kv_modes = ["engine"] + ([] if args.no_kv_column else ["unbounded"])
    _run_all(
        [
            task(w, d, k, p, s, kv)
            for w, d, k in grid
            for kv in kv_modes
            for p in POLICIES
            for s in range(seeds)
        ],
        cache,
        args.workers,
        done,
    )
    goodput_rate = {
        (w, d, k): 0.0
        if args.no_goodput
        else _mean(_cells(done, w, d, k, "sloweave-kv", seeds), "capacity_rps")
        for w, d, k in grid
    }
    _run_all(
        [
            task(w, d, k, p, s, f"goodput@{goodput_rate[(w, d, k)]:.6g}")
            for w, d, k in grid
            if goodput_rate[(w, d, k)] > 0
            for p in POLICIES
            for s in range(seeds)
        ],
        cache,
        args.workers,
        done,
    )

    print(
        f"\ncapacity (req/s, attainment >= 90%, TTFT <= {TTFT_S:g} s): mean [min-max] of "
        f"{seeds} seed(s), {duration:g} s windows, tolerance {rel_tol:g}; pre = "
        "preemptions and KV = peak KV tokens (k) of the run at capacity; unbounded = "
        f"capacity with {UNBOUNDED_KV // 10**6} M KV tokens; goodput at sloweave-kv's "
        "capacity rate"
    )
    summary = []
    for w, d, kind in grid:
        lengths = make_workload(w).generate(100.0, 1000.0, 0)
        try:
            fluid = headroom(
                model,
                FluidLoad.of(lengths.prompt, lengths.output),
                d,
                workload=w,
                kv_tokens=engine.kv_tokens,
            )
        except ServingError:
            fluid = None
        rate = goodput_rate[(w, d, kind)]
        print(f"\n{w}, TPOT ({kind}) <= {d * 1e3:g} ms")
        print(
            f"{'policy':<16}{'capacity':>9}{'spread':>15}{'pre':>7}{'KV k':>7}"
            + ("" if args.no_kv_column else f"{'unbounded':>11}")
            + f"{'goodput':>9}{'fluid':>8}"
        )
        caps = {}
        for p in POLICIES:
            rows = _cells(done, w, d, kind, p, seeds)
            values = [float(r["capacity_rps"]) for r in rows]
            caps[p] = statistics.mean(values)
            spread = f"[{min(values):.2f}-{max(values):.2f}]"
            unbounded = ""
            if not args.no_kv_column:
                wide = _mean(_cells(done, w, d, kind, p, seeds, "unbounded"), "capacity_rps")
                unbounded = f"{wide:>11.2f}"
            good = "-"
            if rate > 0:
                at_rate = _cells(done, w, d, kind, p, seeds, f"goodput@{rate:.6g}")
                good = f"{_mean(at_rate, 'goodput_rps'):.2f}"
            predicted = _fluid_cell(fluid, p) if kind == "every-token" else "-"
            label = p + (" (default)" if p == DEPLOYMENT_DEFAULT else "")
            resolved = {r["resolved"] for r in rows} - {p}
            print(
                f"{label:<16}{caps[p]:>9.2f}{spread:>15}{_mean(rows, 'preemptions'):>7.0f}"
                f"{_mean(rows, 'peak_kv_tokens') / 1e3:>7.0f}{unbounded}{good:>9}{predicted:>8}"
                + (f"  ({', '.join(sorted(resolved))})" if resolved else "")
            )
        best = max(FIXED, key=lambda c: caps[f"fixed:{c}"])
        summary.append((w, d, kind, caps, best, fluid))
    print(
        f"\n{'setting':<28}{'best fixed':>16}{'sloweave':>10}{'-kv':>8}{'paper':>7}"
        f"{'kv/vllm':>9}{'kv/sarathi':>11}{'fluid C*':>9}"
    )
    for w, d, kind, caps, best, fluid in summary:
        base = caps[f"fixed:{best}"]
        kv = caps["sloweave-kv"]
        star = "-" if fluid is None else f"{fluid.chunk_star:.0f}"
        paper = PAPER.get((w, d), "-") if model.name == "sloweave-default" else "-"
        setting = f"{w} {d * 1e3:g}ms {kind}"
        print(
            f"{setting:<28}{f'{base:.2f} (C={best})':>16}{_ratio(caps['sloweave'], base):>10}"
            f"{_ratio(kv, base):>8}{paper if kind == 'every-token' else '-':>7}"
            f"{_ratio(kv, caps['vllm']):>9}{_ratio(kv, caps['sarathi']):>11}{star:>9}"
        )
    if model.name == "sloweave-default":
        print(
            "\nReading: under the paper's own cost model, SLOWeave's fluid capacity over a fixed "
            "chunk C is 1 - F/D + F/(D k), k = C/C*, F = 1.65 ms (schedlab headroom); C* is "
            "hundreds of tokens, so the best fixed chunk trails by a few per cent and the "
            "paper's +38-39 % and 2.4-3.3x are not reachable against a per-setting best fixed "
            "chunk. Gains that large appear only against a poorly sized chunk, vllm's default "
            "budget under a per-token SLO (column kv/vllm), or as goodput at one offered rate "
            "above the baseline's capacity (column goodput)."
        )
    if args.robustness:
        cvs = [float(v) for v in args.robustness.split(",")]
        _run_all(
            [
                task(w, d, k, "sloweave-kv", s, f"predict@{v:g}")
                for w, d, k in grid
                for v in cvs
                for s in range(seeds)
            ],
            cache,
            args.workers,
            done,
        )
        print(
            "\nsloweave-kv with wrong output predictions (lognormal error of CV v): capacity "
            "(mean of seeds) and preemptions at capacity"
        )
        print(f"{'setting':<28}" + "".join(f"{f'v={v:g}':>16}" for v in [0.0, *cvs]))
        for w, d, kind in grid:
            cells = []
            for v in [0.0, *cvs]:
                mode = "engine" if v == 0 else f"predict@{v:g}"
                rows = _cells(done, w, d, kind, "sloweave-kv", seeds, mode)
                pre = _mean(rows, "preemptions")
                cells.append(f"{_mean(rows, 'capacity_rps'):.2f} ({pre:.0f})")
            setting = f"{w} {d * 1e3:g}ms {kind}"
            print(f"{setting:<28}" + "".join(f"{c:>16}" for c in cells))
    print(f"\nwall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
