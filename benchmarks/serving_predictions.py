"""Capacity of KV-aware admission under each output-length prediction model (issue 42,
part 6).

Run: ``nice python benchmarks/serving_predictions.py`` (about 10 minutes on 2 shared
cores; ``--seeds 0`` for half). Writes ``docs/serving-predictions.md``.

Setting: the ``rtx4090_llama-3.1-8b`` calibrated cost model on vLLM's KV capacity for its
GPU (43,920 tokens), the synthetic ``chat`` workload, 120 s arrival windows, SLO TTFT
5 s and TPOT 100 ms, judged on every token and on each request's mean gap. Compared, by
the maximum sustainable rate (``schedlab.serving.capacity``, attainment >= 0.9): vLLM's
FCFS (``vllm``, reads no prediction: searched once), ``sloweave-kv`` (plans with the
point prediction), ``sloweave-kv-amin`` (from the interval's lower end, refined to
``max(lower, generated + 1)``) and ``sloweave-kv-amax`` (from its upper end), under the
prediction models of ``schedlab.predictions``: ``perfect``, ``interval:0.5``,
``interval:0.2``, ``buckets`` (classes [2^k, 2^(k+1)), right with probability 0.8) and
``lognormal:1``. Beside each capacity, the evictions (preemptions by recompute) of the run
at that rate. Every search is a seeded simulation: the same command gives the same page.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from schedlab.jobs import Executor
from schedlab.serving.capacity import CapacityResult, capacity_grid
from schedlab.serving.metrics import SLO
from schedlab.serving.policy_registry import get_policy
from schedlab.serving.scenario import Scenario

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import stamp

ROOT = Path(__file__).resolve().parents[1]
COST_MODEL = "rtx4090_llama-3.1-8b"
WORKLOAD = "chat"
POLICIES = ("vllm", "sloweave-kv", "sloweave-kv-amin", "sloweave-kv-amax")
MODELS = ("perfect", "interval:0.5", "interval:0.2", "buckets", "lognormal:1")
TPOT_S = 0.100
SLO_KINDS = ("every-token", "mean")


def cell(found: list[CapacityResult], policy: str, model: str) -> str:
    """``capacity (evictions)`` per seed, ``/``-separated."""
    spec = model if get_policy(policy).reads_predictions else "perfect"
    texts = []
    for r in found:
        if r.policy == policy and r.predictions == spec:
            kept = r.at_capacity
            evicted = "-" if kept is None else f"{kept.preemptions:,}"
            texts.append(f"{'>=' if r.saturated else ''}{r.capacity_rps:.3f} ({evicted})")
    return " / ".join(texts)


def table(found: list[CapacityResult]) -> list[str]:
    lines = [
        "| policy | " + " | ".join(f"`{m}`" for m in MODELS) + " |",
        "|---|" + "---|" * len(MODELS),
    ]
    for policy in POLICIES:
        cells = [cell(found, policy, m) for m in MODELS]
        if not get_policy(policy).reads_predictions:
            cells = [cells[0] + " *"] + ["same"] * (len(MODELS) - 1)
        lines.append(f"| `{policy}` | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds (default 0,1)")
    parser.add_argument("--output", default=str(ROOT / "docs" / "serving-predictions.md"))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    started = time.perf_counter()
    sections = []
    for kind in SLO_KINDS:
        scenario = Scenario("vllm", COST_MODEL, SLO(ttft_s=5.0, tpot_s=TPOT_S, kind=kind))
        found = capacity_grid(
            WORKLOAD,
            POLICIES,
            scenario,
            seeds=seeds,
            predictions=MODELS,
            executor=Executor(workers=1),
        )
        print(f"TPOT judged on {kind}: {len(found)} searches", flush=True)
        sections += [
            f"## TPOT {TPOT_S * 1e3:g} ms judged on {kind}",
            "",
            *table(found),
            "",
        ]
        kv = scenario.engine.kv_tokens
    wall = time.perf_counter() - started
    command = "python benchmarks/serving_predictions.py" + (
        f" --seeds {args.seeds}" if args.seeds != "0,1" else ""
    )
    lines = [
        "# Serving with predicted output lengths: capacity under each prediction model",
        "",
        f"{stamp(command)} Wall time {wall / 60:.1f} min.",
        "",
        "The setting is in the script's docstring:",
        f"cost model `{COST_MODEL}` ({kv:,} KV tokens), workload `{WORKLOAD}`, 120 s "
        "windows, attainment >= 0.9 at TTFT <= 5 s.",
        "",
        "Each cell: the maximum sustainable rate in req/s (highest rate tested that met the",
        "target; relative tolerance 0.02) and, in brackets, the evictions (preemptions by",
        f"recompute) of the run at that rate, per seed ({', '.join(map(str, seeds))}). "
        "`*`: reads no prediction, searched once",
        '(the same under every model). `docs/design.md`, "Planning with predicted',
        'intervals", describes the policies.',
        "",
        *sections,
    ]
    Path(args.output).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
