"""Every figure of schedlab, one function per figure; computation stays elsewhere.

matplotlib is an optional dependency (the ``plot`` extra, ``pip install -e '.[plot]'``),
imported only when a figure is drawn (:func:`~schedlab.plotting.figures.pyplot`); without
it, drawing raises :class:`~schedlab.errors.SchedlabError`. Each function takes the data a
computation returned (a report, sweep points, a replay) and writes one figure.

* :mod:`~schedlab.plotting.comparison` — :func:`plot_report` (gaps, memory, Gantt) and its
  panels :func:`plot_gaps`, :func:`plot_memory`, :func:`plot_gantt`;
* :mod:`~schedlab.plotting.sweep` — :func:`plot_sweep` (attainment against rate);
* :mod:`~schedlab.plotting.replay` — :func:`plot_replay` (a recorded run and its
  simulation);
* :mod:`~schedlab.plotting.cluster` — :func:`~schedlab.plotting.cluster.plot_breakdown`
  (where the time to the first token goes, per router);
* :mod:`~schedlab.plotting.figures` — loading matplotlib, checking paths, saving, and the
  layout every figure keeps (titles wrapped to the canvas, legends off the data,
  reference lines named: :func:`fit_title`, :func:`reference_line`).
"""

from schedlab.plotting.comparison import plot_gantt, plot_gaps, plot_memory, plot_report
from schedlab.plotting.figures import (
    check_figure_path,
    check_output_path,
    fit_title,
    pyplot,
    reference_line,
    save_figure,
)
from schedlab.plotting.replay import plot_replay
from schedlab.plotting.sweep import plot_sweep

__all__ = [
    "check_figure_path",
    "check_output_path",
    "fit_title",
    "plot_gantt",
    "plot_gaps",
    "plot_memory",
    "plot_replay",
    "plot_report",
    "plot_sweep",
    "pyplot",
    "reference_line",
    "save_figure",
]
