"""The figure of a cluster comparison: where the time to the first token goes, per router.

Two panels of stacked bars, one bar per cluster run: the mean TTFT split into its
components' means (queue, prefill, KV transfer, first decode;
:mod:`schedlab.serving.cluster`), and the P95 TTFT split by each component's share of the
TTFT of the requests at or above it (the slow first tokens). Times are in milliseconds,
like ``schedlab cluster``'s table (the results hold seconds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from schedlab.plotting.figures import fit_title, pyplot, save_figure
from schedlab.serving.cluster_result import BREAKDOWN, ClusterResult

__all__ = ["plot_breakdown"]

_COLOURS = {
    "queue": "#4c72b0",
    "prefill": "#dd8452",
    "transfer": "#55a868",
    "first_decode": "#c44e52",
}
_LABELS = {
    "queue": "queue",
    "prefill": "prefill",
    "transfer": "KV transfer",
    "first_decode": "first decode",
}


def plot_breakdown(
    runs: Sequence[tuple[str, ClusterResult]], path: str | Path, *, title: str = ""
) -> Path:
    """Draw the TTFT breakdown of each ``(label, result)`` and save it to ``path``.

    The title names the workload, the cost model and its hardware; ``title`` (e.g. the
    SLO) is its second line.
    """
    fig, (mean_ax, tail_ax) = pyplot().subplots(
        1, 2, figsize=(max(7.0, 1.6 * len(runs) + 3), 4.8), layout="constrained"
    )
    labels = [label for label, _ in runs]
    x = range(len(runs))
    for ax, kind in ((mean_ax, "mean"), (tail_ax, "tail")):
        bottom = [0.0] * len(runs)
        for name in BREAKDOWN:
            heights = []
            for _, result in runs:
                if kind == "mean":
                    value = result.breakdown[name].mean
                else:
                    value = result.tail_share[name] * result.summary.ttft.p95
                heights.append(0.0 if math.isnan(value) else 1000.0 * value)
            ax.bar(x, heights, bottom=bottom, color=_COLOURS[name], label=_LABELS[name])
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=7, rotation=35, ha="right", rotation_mode="anchor")
        ax.set_ylabel("TTFT (ms)")
    mean_ax.set_title("mean TTFT, by component", fontsize=9)
    tail_ax.set_title("P95 TTFT, split as the TTFT of requests >= P95", fontsize=9)
    handles, names = mean_ax.get_legend_handles_labels()
    fig.legend(handles, names, fontsize=8, ncol=len(BREAKDOWN), loc="outside lower center")
    first = runs[0][1].summary
    what = f"{first.workload}; cost model {first.cost_model} ({first.hardware})"
    fit_title(fig, f"{what}\n{title}" if title else what, fontsize=9)
    return save_figure(fig, path)
