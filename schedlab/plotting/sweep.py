"""The figure of a policy sweep: SLO attainment against arrival rate, one line a policy."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from schedlab.plotting.figures import pyplot, save_figure
from schedlab.serving.capacity import SweepPoint, sweep_title

__all__ = ["plot_sweep"]


def plot_sweep(points: Sequence[SweepPoint], path: str | Path, *, title: str = "") -> Path:
    """Draw attainment against rate for every policy of ``points`` and save it to ``path``.

    A dotted line marks the 90% attainment that defines capacity. The title always
    names the workload, the cost model and its hardware; ``title`` (e.g. the SLO) is its
    second line.
    """
    fig, ax = pyplot().subplots(figsize=(6, 4))
    for policy in dict.fromkeys(p.policy for p in points):
        mine = [p for p in points if p.policy == policy]
        ax.plot(
            [p.rate_rps for p in mine],
            [p.summary.attainment for p in mine],
            marker="o",
            label=policy,
        )
    ax.axhline(0.9, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("arrival rate (req/s)")
    ax.set_ylabel("SLO attainment")
    what = sweep_title(points).replace(", cost model", "\ncost model", 1)  # fits the width
    ax.set_title(f"{what}\n{title}" if title else what, fontsize=9)
    ax.set_ylim(0, 1.02)
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, path)
