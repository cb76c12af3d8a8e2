"""Cluster serving: prefill deflection, hybrid overflow, routing cost (issue 14).

Run: ``python benchmarks/cluster_deflection.py`` (the Azure trace is read from
``$SCHEDLAB_DATA``, by default ``../shared/data`` beside the repository).

Cost model: ``rtxpro6000_llama-3.1-8b``, the shipped calibrated model of the 96 GB RTX PRO
6000 (vLLM 0.19.0, Llama-3.1-8B); of the two shipped models it is the closer to the
A100-80GB nodes of the deflection paper (datacenter memory size; the RTX 4090's 24 GB
would hold a few dozen long requests). Each node's KV cache is vLLM's formula for that
GPU (:func:`schedlab.llm.models.kv_token_capacity`, 96 GB, utilisation 0.9); link
25 GB/s, 20 us; SLO TTFT 3 s and TPOT 100 ms on every token. Every figure is the mean over
three 180 s windows; each line says which.

(a) 2P2D, ``disaggregated`` vs ``deflect``, on the Azure code trace's own bursty
    timestamps (prompts 2,048 tokens on average, outputs 28: the prefill side is what
    saturates), rescaled to a rate where the prefill nodes are saturated; three disjoint
    180 s windows of the rescaled trace stand for the three seeds (a replay has no seed).
    Printed: the share of the P95-and-above TTFT that is prefill execution (paper: 2-23%),
    and deflect's P95 TTFT reduction and attainment change against disaggregated (paper:
    up to 81% lower P95 TTFT, up to 79% higher attainment).
(a2) The same comparison under the issue's ``bursty`` synthetic load (Gamma arrivals of CV
    ``BURSTY_CV``) with seeds 0-2, once with ShareGPT lengths (the ``bursty`` workload:
    decode-heavy, so under 2P2D its decode side saturates first) and once with the arXiv
    lengths of ``long`` (prefill-heavy), at a rate where the prefill side is the one that
    backs up. Printed per run: which side's queue dominates (mean queue time before the
    hand-off vs at the decode node), so a reader sees whether the premise held.
(b) 4C (colocated, ``vllm`` policy) vs 2P2D ``hybrid`` (decode nodes under ``sangam``'s
    deficit budget) on ``chat`` (ShareGPT lengths) and ``long`` (arXiv lengths), Poisson,
    seeds 0-2, at three rates each (``SANGAM_RATES``: moderate to overloaded): the
    relative mean-latency difference (Sangam: colocated 9-20% lower on chat; hybrid 8-20%
    lower on long).
Routers see each request's predicted output length; here ``prediction_cv = 0``, so the
prediction is the true length (an oracle router), as the output says.

(c) The wall-clock time of one ``deflect`` router call (time.perf_counter around each
    call): median, P99 and largest over every call of (a), and ``routing_ms`` of
    :data:`ROUTING_COMMAND` (issue 53's heavy window) in three processes; the target is a
    P99 of at most 1 ms.
(d) With ``--no-harm`` (only this part, and (a)): issue 40's check. 2P2D, ``bursty`` at
    2, 4, 6, 8 and 12 req/s, seeds 0 and 1, 180 s, ``disaggregated`` against ``deflect``
    and ``hybrid``, mean over the seeds of P95 TTFT and attainment, in two settings: the
    CLI's defaults with the RTX PRO 6000 model (TTFT 5 s, TPOT 25 ms, the KV capacity of
    the model's deployment: ``schedlab cluster --cost-model rtxpro6000_llama-3.1-8b``; issue
    40 measured the harm there when the default was a literal 262,144 tokens) and this
    benchmark's (above). Target: never worse than ``disaggregated`` by more than 1 point
    of attainment or 5% of P95 TTFT. Writes ``docs/cluster_no_harm.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from schedlab.llm.models import get_model_shape, kv_token_capacity
from schedlab.serving.cluster import Cluster, kv_link, parse_nodes, simulate_cluster
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.scenario import Scenario
from schedlab.serving.workloads import (
    BURSTY_CV,
    RandomWorkload,
    RequestStream,
    builtin_table,
    make_workload,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import command_line, stamp, tee_page

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SCHEDLAB_DATA") or ROOT.parent / "shared" / "data")
COST_MODEL = "rtxpro6000_llama-3.1-8b"
WINDOW_S = 180.0
SEEDS = (0, 1, 2)
SLO_ = SLO(ttft_s=3.0, tpot_s=0.100)
DEFLECT_RATE = float(os.environ.get("DEFLECT_RATE", "20"))
# moderate to overloaded: at the highest rates 4C's mean latency is several times its
# unloaded value, so the comparison there is between two saturated systems
SANGAM_RATES = {"chat": (3.0, 6.0, 10.0), "long": (4.0, 8.0, 14.0)}
BURSTY_RATES = {
    "sharegpt": float(os.environ.get("BURSTY_CHAT_RATE", "16")),
    "arxiv": float(os.environ.get("BURSTY_LONG_RATE", "6")),
}


def scenario(policy: str, seed: int) -> Scenario:
    kv = kv_token_capacity(get_model_shape("llama-3.1-8b"), 96e9)
    return Scenario(policy, COST_MODEL, SLO_, EngineConfig(kv_tokens=kv), seed=seed)


def azure_windows(rate: float) -> list[RequestStream]:
    """Three disjoint 180 s windows of the Azure code trace rescaled to ``rate``."""
    whole = make_workload("azure-code", data_dir=DATA).generate(rate, None, 0)
    windows = []
    for k in range(len(SEEDS)):
        lo, hi = k * WINDOW_S, (k + 1) * WINDOW_S
        keep = (whole.arrival_s >= lo) & (whole.arrival_s < hi)
        windows.append(
            RequestStream(
                f"{whole.name} [{lo:g}, {hi:g}) s",
                whole.arrival_s[keep] - lo,
                whole.prompt[keep],
                whole.output[keep],
                WINDOW_S,
            )
        )
    return windows


def part_a() -> list[float]:
    print(
        f"(a) 2P2D on azure-code timestamps rescaled to {DEFLECT_RATE:g} req/s, windows "
        "[0,180), [180,360), [360,540) s"
    )
    routing: list[float] = []
    # a replay has no seed: every window runs under seed 0 (noise-free here anyway)
    _compare("azure-code", azure_windows(DEFLECT_RATE), routing, seeded=False)
    return routing


def _compare(
    label: str,
    streams: list[RequestStream],
    routing: list[float],
    seeded: bool = True,
    lines: list[str] | None = None,
) -> None:
    """``disaggregated`` vs ``deflect`` on 2P2D over ``streams`` (the k-th under seed k when
    ``seeded``, else seed 0): per run, and the means; ``routing`` collects deflect's call
    times."""
    rows: dict[str, list] = {"disaggregated": [], "deflect": []}
    for k, stream in enumerate(streams):
        seed = k if seeded else 0
        for router in rows:
            spec = Cluster(parse_nodes("2P2D"), router, scenario("vllm", seed), kv_link())
            result = simulate_cluster(stream, spec, time_routing=True)
            rows[router].append(result)
            if router == "deflect":
                routing.extend(result.run.routing_s.tolist())
            d = result.to_dict()
            shares = " ".join(f"{k} {v:.1%}" for k, v in d["tail_share"].items())
            sides = d["queue_sides"]
            before, after = sides["queue_prefill_side"]["mean"], sides["queue_decode_side"]["mean"]
            print(
                f"  {stream.name:<34} {router:<14} n={result.summary.n_requests:<5} "
                f"P95 TTFT {d['ttft_p95_s']:7.3f} s  mean {d['ttft_mean_s']:7.3f} s  "
                f"lat {d['latency_mean_s']:6.2f} s  attain {d['attainment']:.3f}  "
                f"deflected {d['deflected']:<4} preempt {d['summary']['preemptions']:<4} "
                f"queue prefill/decode side {before:.3f}/{after:.3f} s "
                f"({'prefill' if before >= after else 'decode'} side backs up)  "
                f"tail shares: {shares}  ({result.wall_s:.1f} s)",
                flush=True,
            )
    for router, results in rows.items():
        share = statistics.mean(r.tail_share["prefill"] for r in results)
        print(f"  {router}: prefill execution share of TTFT >= P95: {share:.1%} (paper 2-23%)")
    p95 = {k: statistics.mean(r.summary.ttft.p95 for r in v) for k, v in rows.items()}
    att = {k: statistics.mean(r.summary.attainment for r in v) for k, v in rows.items()}
    cut = 1 - p95["deflect"] / p95["disaggregated"]
    gain = att["deflect"] / att["disaggregated"] - 1 if att["disaggregated"] else float("nan")
    summary = (
        f"{label}: deflect vs disaggregated: P95 TTFT {p95['deflect']:.3f} vs "
        f"{p95['disaggregated']:.3f} s = {cut:+.1%} lower (paper: up to 81% lower); "
        f"attainment {att['deflect']:.3f} vs {att['disaggregated']:.3f} = {gain:+.1%} "
        "(paper: up to 79% higher)"
    )
    print(f"  {summary}")
    if lines is not None:
        lines.append(summary)


def part_a2(routing: list[float]) -> None:
    for table, rate in BURSTY_RATES.items():
        workload = RandomWorkload(
            f"bursty-{table}", ((1.0, builtin_table(table)),), arrival_cv=BURSTY_CV
        )
        print(
            f"(a2) 2P2D on bursty (Gamma CV {BURSTY_CV:g}) {table} lengths at {rate:g} req/s, "
            "seeds 0-2"
        )
        streams = [workload.generate(rate, WINDOW_S, seed) for seed in SEEDS]
        _compare(f"bursty {table}", streams, routing)


def part_b() -> None:
    print("(b) 4C (vllm) vs 2P2D hybrid (sangam decode nodes), Poisson, seeds 0-2")
    for workload, rates in SANGAM_RATES.items():
        for rate in rates:
            _sangam_point(workload, rate)


def _sangam_point(workload: str, rate: float) -> None:
    means: dict[str, list[float]] = {"4C": [], "hybrid": []}
    for seed in SEEDS:
        colocated = Cluster(parse_nodes("4C"), "least-tokens", scenario("vllm", seed))
        hybrid = Cluster(
            parse_nodes("2P2D"),
            "hybrid",
            scenario("vllm", seed),
            kv_link(),
            decode_policy="sangam",
        )
        for key, spec in (("4C", colocated), ("hybrid", hybrid)):
            result = simulate_cluster(workload, spec, rate=rate, duration_s=WINDOW_S)
            means[key].append(result.summary.latency.mean)
            print(
                f"  {workload} {rate:g}/s seed {seed} {spec.label:<22} mean latency "
                f"{result.summary.latency.mean:7.3f} s  attain "
                f"{result.summary.attainment:.3f}  ({result.wall_s:.1f} s)",
                flush=True,
            )
    c, h = statistics.mean(means["4C"]), statistics.mean(means["hybrid"])
    print(
        f"  {workload} {rate:g}/s: colocated {c:.3f} s, hybrid {h:.3f} s: colocated is "
        f"{1 - c / h:+.1%} lower than hybrid (Sangam: chat +9..+20%, long -8..-20%, i.e. "
        "hybrid 8-20% lower)"
    )


NO_HARM_RATES = (2.0, 4.0, 6.0, 8.0, 12.0)
NO_HARM_SEEDS = (0, 1)
NO_HARM_PAGE = ROOT / "docs" / "cluster_no_harm.md"


def cli_scenario(seed: int) -> Scenario:
    """``schedlab cluster --cost-model rtxpro6000_llama-3.1-8b``'s scenario."""
    return Scenario("vllm", COST_MODEL, seed=seed)


def part_d() -> list[str]:
    rows = [
        "| setting | rate | router | P95 TTFT (s) | attainment | vs disaggregated | deflected |",
        "|---|---|---|---|---|---|---|",
    ]
    for setting, make in (("CLI defaults", cli_scenario), ("benchmark", _bench_scenario)):
        for rate in NO_HARM_RATES:
            base: tuple[float, float] | None = None
            for router in ("disaggregated", "deflect", "hybrid"):
                p95, att, moved = [], [], 0
                for seed in NO_HARM_SEEDS:
                    spec = Cluster(parse_nodes("2P2D"), router, make(seed), kv_link())
                    r = simulate_cluster("bursty", spec, rate=rate, duration_s=WINDOW_S)
                    p95.append(r.summary.ttft.p95)
                    att.append(r.summary.attainment)
                    moved += r.to_dict()["deflected"]
                mean_p95, mean_att = statistics.mean(p95), statistics.mean(att)
                if base is None:
                    base, verdict = (mean_p95, mean_att), ""
                else:
                    worse_p95 = mean_p95 / base[0] - 1
                    worse_att = base[1] - mean_att
                    ok = worse_p95 <= 0.05 and worse_att <= 0.01
                    verdict = (
                        f"P95 {worse_p95:+.1%}, attainment {-worse_att:+.3f}: "
                        f"{'ok' if ok else 'WORSE'}"
                    )
                row = (
                    f"| {setting} | {rate:g} | {router} | {mean_p95:.3f} | {mean_att:.3f} | "
                    f"{verdict} | {moved} |"
                )
                rows.append(row)
                print(row, flush=True)
    return rows


def _bench_scenario(seed: int) -> Scenario:
    return scenario("vllm", seed)


#: The command of issue 53's routing target: the heavy window of the Azure code trace.
ROUTING_COMMAND = (
    "cluster --nodes 2P2D --router deflect --workload azure-code --rate 20 --duration 90s "
    "--cost-model rtxpro6000_llama-3.1-8b --tpot 100ms --ttft 3s --json"
)


def part_c(repeats: int = 3) -> None:
    """``routing_ms`` of :data:`ROUTING_COMMAND`'s run, ``repeats`` times as a process."""
    print(f"(c) `schedlab {ROUTING_COMMAND}` (target: routing_ms.p99 <= 1 ms)")
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-m", "schedlab", *ROUTING_COMMAND.split()],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "SCHEDLAB_DATA": str(DATA)},
        )
        result = json.loads(done.stdout)
        r = result["routing_ms"]
        print(
            f"  routing_ms median {r['median']:.3f}, p99 {r['p99']:.3f}, max {r['max']:.3f} "
            f"over {r['calls']} calls; deflected {result['deflected']}, transfers "
            f"{result['transfers']}; run {result['wall_s']:.2f} s",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-harm", action="store_true", help="part (d), and (a), only")
    parser.add_argument("--routing", action="store_true", help="the command of part (c) only")
    parser.add_argument(
        "--page",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the output of parts (a)-(c) as a page",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.routing:
        part_c()
        return 0
    if args.no_harm:
        print("(d) issue 40's no-harm check (mean of seeds 0, 1; 180 s)")
        rows = part_d()
        print("output predictions: prediction_cv = 0 (the true lengths: an oracle router)")
        lines: list[str] = []
        _compare("azure-code", azure_windows(DEFLECT_RATE), [], seeded=False, lines=lines)
        NO_HARM_PAGE.write_text(
            "# Deflection and hybrid overflow that do no harm\n\n"
            f"{stamp('python benchmarks/cluster_deflection.py --no-harm')} Its docstring, "
            "parts (a) and (d), gives the settings.\n\n"
            "2P2D, `bursty`, mean of seeds 0 and 1, 180 s; target: never worse than "
            "`disaggregated` by more than 1 point of attainment or 5% of P95 TTFT.\n\n"
            + "\n".join(rows)
            + f"\n\nAzure code trace at {DEFLECT_RATE:g} req/s, three 180 s windows "
            "(target: `deflect` cuts the P95 TTFT by at least 50%):\n\n"
            + "\n".join(f"    {line}" for line in lines)
            + "\n"
        )
        print(
            f"wrote {NO_HARM_PAGE.relative_to(ROOT)}; total wall "
            f"{time.perf_counter() - started:.0f} s"
        )
        return 0
    with tee_page(
        args.page,
        "Deflection, hybrid overflow and colocation on bursty loads",
        command_line("cluster_deflection.py", list(sys.argv[1:] if argv is None else argv)),
    ):
        print("output predictions: prediction_cv = 0 (the true lengths: an oracle router)")
        routing = part_a()
        part_a2([])
        part_b()
        ms = np.asarray(routing) * 1e3
        print(
            f"(c) deflect router calls of (a): median {np.median(ms):.3f} ms, P99 "
            f"{np.percentile(ms, 99):.3f} ms, max {ms.max():.3f} ms over {ms.size} calls"
        )
        part_c()
        print(f"total wall {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
