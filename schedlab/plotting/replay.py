"""The figure of a replay: a recorded run and its simulation, side by side.

Six panels, measured (solid) against simulated (dashed): running and waiting requests,
and prompt and generation tokens per second, each per second of the run (the run's
``timeseries.csv`` against :func:`~schedlab.calibration.replay.simulated_series`); then
the empirical CDFs of TTFT and of latency, in milliseconds like ``schedlab replay``'s
table. The run's series count from its stat logger's start and the simulation's from the
first request, so a few hundred milliseconds of offset between the two time axes are
expected. One legend, below the panels, names the two line styles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from schedlab.calibration.recorded_run import MeasuredSeries
from schedlab.calibration.replay import ReplayReport
from schedlab.plotting.figures import fit_title, pyplot, save_figure

__all__ = ["plot_replay"]

_SERIES = (
    ("running", "running requests"),
    ("waiting", "waiting requests"),
    ("prompt_tps", "prompt tokens / s"),
    ("generation_tps", "generation tokens / s"),
)


def _series(
    ax: Any, key: str, label: str, measured: MeasuredSeries | None, simulated: Any
) -> None:
    if measured is not None:
        ax.plot(measured.t, getattr(measured, key), color="C0", lw=1.2)
    if simulated is not None:
        ax.plot(simulated.t, getattr(simulated, key), color="C1", lw=1.2, ls="--")
    ax.set_ylabel(label)
    ax.set_xlabel("time since the start of the run (s)")
    ax.grid(True, alpha=0.3)


def _cdf(ax: Any, name: str, measured: np.ndarray, simulated: np.ndarray) -> None:
    """Empirical CDFs of ``name`` (seconds in the report, drawn in ms)."""
    for values, style, colour in ((measured, "-", "C0"), (simulated, "--", "C1")):
        data = np.sort(values[~np.isnan(values)]) * 1000.0
        if data.size:
            ax.plot(data, np.arange(1, data.size + 1) / data.size, color=colour, ls=style)
    ax.set_xlabel(f"{name} (ms)")
    ax.set_ylabel("fraction of requests")
    ax.grid(True, alpha=0.3)


def plot_replay(report: ReplayReport, path: str | Path, *, title: str = "") -> Path:
    """Draw the replay figure (module docstring) and save it to ``path``."""
    fig, axes = pyplot().subplots(3, 2, figsize=(12, 10.5), layout="constrained")
    for ax, (key, label) in zip(axes.ravel()[:4], _SERIES, strict=True):
        _series(ax, key, label, report.measured_series, report.series)
    _cdf(axes[2][0], "TTFT", report.measured["ttft"], report.simulated["ttft"])
    _cdf(axes[2][1], "latency", report.measured["latency"], report.simulated["latency"])
    from matplotlib.lines import Line2D  # loaded by pyplot() above

    styles = [Line2D([], [], color="C0", lw=1.2), Line2D([], [], color="C1", lw=1.2, ls="--")]
    fig.legend(styles, ["measured", "simulated"], loc="outside lower center", ncol=2)
    worst, diff = report.worst
    fit_title(
        fig,
        f"{title or 'replay'}\nfurthest of {len(report.metrics)} metrics from its measurement: "
        f"{worst} {diff:+.1f}%; {report.preemptions} simulated preemptions",
        fontsize=11,
    )
    return save_figure(fig, path)
