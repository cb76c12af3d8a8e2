"""Prefix-cache-aware routing on the Mooncake trace (issue 40).

Run: ``python benchmarks/cluster_prefix.py`` (the trace is read from ``$SCHEDLAB_DATA``,
by default ``../shared/data`` beside the repository). Writes ``docs/cluster_prefix.md``
and ``docs/cluster_prefix.png``.

Workload: the first 10 minutes of ``mooncake_synthetic_trace.jsonl`` (Qin et al.,
"Mooncake", FAST 2025), replayed at its recorded times, with its shared prefixes
(``hash_ids``, blocks of 512 tokens; :mod:`schedlab.serving.prefix`). Nodes: the
``rtxpro6000_llama-3.1-8b`` calibrated model, each with vLLM's KV capacity for a 96 GB GPU
(as ``benchmarks/cluster_deflection.py``), prefix caching on, SLO TTFT 3 s and TPOT
100 ms on every token, oracle output predictions (``prediction_cv = 0``).

Compared: colocated ``4C`` (``vllm`` policy) under ``round-robin``, ``least-tokens`` and
``prefix-aware``; ``2P2D`` under ``disaggregated`` and ``deflect``. Reported per run:
TTFT mean and P95, attainment, and the prefix-cache hit rate (prompt tokens found in a
node's cache at first admission over all prompt tokens, vLLM's definition), with the hit
tokens per node. The bound on any hit rate is the trace's own reuse with an unbounded
cache, printed first.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from schedlab.llm.models import get_model_shape, kv_token_capacity
from schedlab.serving.cluster import Cluster, kv_link, parse_nodes, simulate_cluster
from schedlab.serving.cluster_result import ClusterResult
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.scenario import Scenario
from schedlab.serving.workloads import RequestStream, make_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import stamp

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SCHEDLAB_DATA") or ROOT.parent / "shared" / "data")
COST_MODEL = "rtxpro6000_llama-3.1-8b"
WINDOW_S = 600.0
SLO_ = SLO(ttft_s=3.0, tpot_s=0.100)
RUNS = (
    ("4C", "round-robin"),
    ("4C", "least-tokens"),
    ("4C", "prefix-aware"),
    ("2P2D", "disaggregated"),
    ("2P2D", "deflect"),
)
PAGE = ROOT / "docs" / "cluster_prefix.md"
FIGURE = ROOT / "docs" / "cluster_prefix.png"


def scenario() -> Scenario:
    kv = kv_token_capacity(get_model_shape("llama-3.1-8b"), 96e9)
    return Scenario("vllm", COST_MODEL, SLO_, EngineConfig(kv_tokens=kv), seed=0)


def unbounded_reuse(stream: RequestStream) -> float:
    """Prompt tokens whose blocks an earlier request already had, over all prompt tokens:
    the hit rate of one node with an unbounded cache that keeps every block."""
    assert stream.prefix is not None
    seen: set[int] = set()
    block = stream.prefix.block_tokens
    hits = 0
    for ids, prompt in zip(stream.prefix.hash_ids, stream.prompt.tolist(), strict=True):
        chain = ids.tolist()
        m = 0
        while m < len(chain) and chain[m] in seen:
            m += 1
        hits += min(m * block, prompt - 1)
        seen.update(chain)
    return hits / float(stream.prompt.sum())


def plot(results: list[ClusterResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r.label for r in results]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    panels = (
        ("mean TTFT (s)", [r.summary.ttft.mean for r in results]),
        ("P95 TTFT (s)", [r.summary.ttft.p95 for r in results]),
        ("prefix-cache hit rate", [r.run.hit_rate for r in results]),
    )
    for ax, (title, values) in zip(axes, panels, strict=True):
        ax.bar(range(len(values)), values, color=["C0", "C0", "C2", "C1", "C3"])
        ax.set_xticks(range(len(values)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(title)
        for k, v in enumerate(values):
            ax.annotate(f"{v:.3g}", (k, v), ha="center", va="bottom", fontsize=8)
    fig.suptitle("Mooncake trace, first 10 min as recorded; RTX PRO 6000 model, SLO 3 s / 100 ms")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    started = time.perf_counter()
    stream = make_workload("mooncake", data_dir=DATA).generate(None, WINDOW_S, 0)
    reuse = unbounded_reuse(stream)
    lines = [
        f"{len(stream)} requests, {int(stream.prompt.sum()):,} prompt tokens; hit rate of "
        f"one unbounded cache: {reuse:.3f}"
    ]
    print(lines[0], flush=True)
    results = []
    for nodes, router in RUNS:
        spec = Cluster(parse_nodes(nodes), router, scenario(), kv_link())
        result = simulate_cluster(stream, spec)
        results.append(result)
        s = result.summary
        line = (
            f"| {result.label} | {s.ttft.mean:.3f} | {s.ttft.p95:.3f} | {s.attainment:.3f} | "
            f"{result.run.hit_rate:.3f} | {', '.join(f'{h:,}' for h in result.run.node_hits)} |"
        )
        lines.append(line)
        print(line, f"({result.wall_s:.0f} s)", flush=True)
    plot(results, FIGURE)
    by = {r.label: r for r in results}
    aware, least = by["prefix-aware@4C"], by["least-tokens@4C"]
    verdict = (
        f"prefix-aware vs least-tokens: mean TTFT {aware.summary.ttft.mean:.3f} vs "
        f"{least.summary.ttft.mean:.3f} s, hit rate {aware.run.hit_rate:.3f} vs "
        f"{least.run.hit_rate:.3f}"
    )
    print(verdict)
    PAGE.write_text(
        "# Prefix-cache-aware routing on the Mooncake trace\n\n"
        f"{stamp('python benchmarks/cluster_prefix.py')} Its docstring gives the setting.\n\n"
        f"{lines[0]}.\n\n"
        "| cluster | mean TTFT (s) | P95 TTFT (s) | attainment | hit rate | hit tokens per "
        "node |\n|---|---|---|---|---|---|\n" + "\n".join(lines[1:]) + "\n\n"
        f"{verdict}.\n\n![TTFT and hit rate per cluster](cluster_prefix.png)\n"
    )
    print(f"wrote {PAGE.relative_to(ROOT)} and {FIGURE.relative_to(ROOT)}")
    print(f"total wall {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
