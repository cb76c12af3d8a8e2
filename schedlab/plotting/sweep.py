"""The figure of a policy sweep: SLO attainment against arrival rate, one line a policy.

Policies whose curves coincide (at a low chunk budget, ``fixed:2048`` and ``vllm`` often
do) stay visible: each policy has its own marker and line style, and the earlier ones are
drawn with larger, hollow markers, so a later curve on top of an earlier one leaves the
earlier one's rings showing. The legend sits below the axes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from schedlab.plotting.figures import fit_title, pyplot, reference_line, save_figure
from schedlab.serving.capacity import SweepPoint, sweep_title

__all__ = ["plot_sweep"]

_MARKERS = "osD^v<>pXh"
_STYLES = ("-", "--", "-.", ":")


def plot_sweep(
    points: Sequence[SweepPoint], path: str | Path, *, title: str = "", target: float = 0.9
) -> Path:
    """Draw attainment against rate for every policy of ``points`` and save it to ``path``.

    A labelled dotted line marks the attainment ``target`` that defines capacity
    (:mod:`schedlab.serving.capacity`). The title always names the workload, the cost
    model and its hardware; ``title`` (e.g. the SLO) is its second line. Attainment is a
    fraction and rates are in requests per second, as in ``schedlab sweep``'s table.
    """
    fig, ax = pyplot().subplots(figsize=(9, 5.5), layout="constrained")
    policies = list(dict.fromkeys(p.policy for p in points))
    for k, policy in enumerate(policies):
        mine = [p for p in points if p.policy == policy]
        ax.plot(
            [p.rate_rps for p in mine],
            [p.summary.attainment for p in mine],
            marker=_MARKERS[k % len(_MARKERS)],
            markersize=max(4.0, 11.0 - 2.0 * k),
            markerfacecolor="none",
            markeredgewidth=1.5,
            linestyle=_STYLES[k % len(_STYLES)],
            linewidth=1.5,
            color=f"C{k % 10}",
            label=policy,
        )
    ax.set_ylim(-0.03, 1.06)
    reference_line(ax, target, f"capacity target: attainment {target:g}")
    ax.set_xlabel("arrival rate (req/s)")
    ax.set_ylabel("SLO attainment (fraction of requests)")
    ax.grid(True, alpha=0.3)
    fig.legend(loc="outside lower center", ncol=min(len(policies) + 1, 5), fontsize=9)
    what = sweep_title(points)
    fit_title(fig, f"{what}\n{title}" if title else what)
    return save_figure(fig, path)
