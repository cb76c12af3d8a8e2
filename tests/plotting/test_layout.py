"""Every figure schedlab draws, rendered from its command with real data, and its layout.

Each case runs a ``--plot`` command and catches the figure as it is saved. A figure
passes when nothing is drawn outside the canvas (its tight bounding box, and every text's
window extent, lie within the figure), every legend is outside the axes it describes or
placed by matplotlib where it covers the fewest points (``loc='best'``), and every
reference line (``axhline``/``axvline``) carries a label that a legend shows and that is
written in the axes beside it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from schedlab.cli import main
from tests.calibration.conftest import RUN

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402
from matplotlib.text import Text  # noqa: E402

TOLERANCE_PX = 1.0
BEST = 0  # Legend.codes["best"]

COMMANDS = {
    "replay": ["replay", str(RUN)],
    "sweep": [
        "sweep",
        "--workload",
        "mixed",
        "--tpot",
        "10ms",
        "--policies",
        "sloweave-kv,fixed:512,fixed:2048,vllm",
        "--rates",
        "5,26",
        "--duration",
        "10s",
        "--workers",
        "1",
    ],
    "compare": [
        "compare",
        "instances/tiny-1.json",
        "instances/tiny-2.json",
        "--solvers",
        "fcfs,svf",
    ],
    "compare-one": [
        "compare",
        "instances/tiny-1.json",
        "instances/tiny-2.json",
        "--solvers",
        "fcfs,svf",
        "--plot-schedule",
        "tiny-2:fcfs",
    ],
    "cluster": [
        "cluster",
        "--workload",
        "chat",
        "--routers",
        "disaggregated,deflect",
        "--rates",
        "2,4",
        "--duration",
        "4s",
        "--tpot",
        "100ms",
    ],
}


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """Every figure saved while the test runs, in order."""
    figures: list[Figure] = []
    savefig = Figure.savefig

    def keep(fig: Figure, *args: Any, **kwargs: Any) -> None:
        figures.append(fig)
        savefig(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return figures


def _render(saved: list[Figure], tmp_path: Any, argv: list[str]) -> Figure:
    """Run ``argv --plot`` and return the figure it saved (exactly one)."""
    assert main([*argv, "--plot", str(tmp_path / "figure.png")]) == 0
    assert len(saved) == 1
    return saved[0]


def _inside(inner: Any, outer: Any) -> bool:
    return (
        inner.x0 >= outer.x0 - TOLERANCE_PX
        and inner.y0 >= outer.y0 - TOLERANCE_PX
        and inner.x1 <= outer.x1 + TOLERANCE_PX
        and inner.y1 <= outer.y1 + TOLERANCE_PX
    )


def _draw(fig: Figure, renderer: Any) -> list[Text]:
    """Draw ``fig`` and return the texts drawn (not the labels of ticks out of view)."""
    drawn: list[Text] = []
    draw = Text.draw

    def record(text: Text, *args: Any) -> None:
        drawn.append(text)
        draw(text, *args)

    Text.draw = record  # type: ignore[method-assign]
    try:
        fig.draw(renderer)
    finally:
        Text.draw = draw  # type: ignore[method-assign]
    return drawn


def layout_problems(fig: Figure) -> list[str]:
    """What a reader would see wrong in ``fig`` (module docstring); empty when none."""
    renderer = FigureCanvasAgg(fig).get_renderer()  # pyplot.close took the figure's canvas
    drawn = _draw(fig, renderer)  # the layout engine places everything, as savefig did
    problems = []
    tight = fig.get_tightbbox(renderer)  # inches
    whole = fig.bbox_inches
    if not _inside(tight.transformed(fig.dpi_scale_trans), whole.transformed(fig.dpi_scale_trans)):
        problems.append(f"tight bounding box {tight.bounds} exceeds the figure {whole.bounds}")
    for text in drawn:
        if text.get_visible() and text.get_text().strip():
            extent = text.get_window_extent(renderer)
            if not _inside(extent, fig.bbox):
                problems.append(f"text {text.get_text()!r} is clipped: {extent.bounds}")
    axes_extents = [ax.get_window_extent(renderer) for ax in fig.axes]
    for legend in fig.findobj(Legend):
        box = legend.get_window_extent(renderer)
        if legend._loc != BEST and any(box.overlaps(extent) for extent in axes_extents):
            names = [t.get_text() for t in legend.get_texts()]
            problems.append(f"legend {names} lies on an axes and is not placed 'best'")
    for ax in fig.axes:
        legends = [t.get_text() for lg in fig.findobj(Legend) for t in lg.get_texts()]
        written = [t.get_text() for t in ax.texts]
        for line in ax.get_lines():
            x_data, y_data = line.get_transform().contains_branch_seperately(ax.transData)
            if x_data and y_data:
                continue  # a data line, not a reference line across the axes
            label = line.get_label()
            if label.startswith("_") or label not in legends or label not in written:
                problems.append(f"reference line {label!r} is not named in a legend and beside it")
    return problems


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_figure_is_laid_out_within_its_canvas(name, saved, tmp_path, data_dir):
    if name == "replay" and not RUN.is_dir():
        pytest.skip("the recorded run is not present")
    fig = _render(saved, tmp_path, COMMANDS[name])
    assert layout_problems(fig) == []


def test_the_check_sees_a_clipped_title_an_unlabelled_line_and_a_covering_legend():
    fig = Figure(figsize=(3, 2), layout="constrained")
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], label="data")
    ax.axhline(0.5)
    ax.legend(loc="upper left")
    fig.suptitle("a title far too long to fit the width of a figure three inches wide")
    problems = layout_problems(fig)
    assert any("is clipped" in p for p in problems)
    assert any("tight bounding box" in p for p in problems)
    assert any("reference line" in p for p in problems)
    assert any("not placed 'best'" in p for p in problems)


def test_the_cluster_figure_is_in_the_tables_milliseconds(saved, tmp_path, capsys):
    fig = _render(saved, tmp_path, [*COMMANDS["cluster"], "--json"])
    rows = json.loads(capsys.readouterr().out)
    mean_ax = fig.axes[0]
    assert mean_ax.get_ylabel() == "TTFT (ms)"
    stacks = [0.0] * len(rows)
    for bar in mean_ax.patches:
        stacks[round(bar.get_x() + bar.get_width() / 2)] += bar.get_height()
    assert stacks == pytest.approx([1000 * row["ttft_mean_s"] for row in rows])


def test_coinciding_sweep_curves_stay_apart_in_style(saved, tmp_path):
    fig = _render(saved, tmp_path, COMMANDS["sweep"])
    curves = [line for line in fig.axes[0].get_lines() if not line.get_label().startswith("cap")]
    assert [line.get_label() for line in curves] == [
        "sloweave-kv",
        "fixed:512",
        "fixed:2048",
        "vllm",
    ]
    looks = {(line.get_marker(), line.get_linestyle(), line.get_markersize()) for line in curves}
    assert len(looks) == len(curves)


def test_compare_draws_a_column_per_instance_or_the_chosen_one(saved, tmp_path, capsys):
    tiny = [f"instances/tiny-{k}.json" for k in range(1, 6)]
    base = ["compare", "--solvers", "fcfs,svf", "--quiet"]
    titles = []
    for paths, extra, panels in (
        (tiny[:2], [], 1 + 2 * 2),  # gaps, then memory over Gantt for each instance
        (tiny[:2], ["--plot-schedule", "tiny-2:fcfs"], 1 + 2),
        (tiny, [], 1),  # five instances: the gaps alone, and a note says why
    ):
        saved.clear()
        fig = _render(saved, tmp_path, [*base, *paths, *extra])
        assert len(fig.axes) == panels
        titles.append([ax.get_title() for ax in fig.axes])
    assert "choose one with --plot-schedule" in capsys.readouterr().err
    assert titles[0][1].startswith("tiny-1: svf") and titles[0][3].startswith("tiny-2: svf")
    assert titles[1][1].startswith("tiny-2: fcfs")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--plot-schedule", "tiny-1"], "--plot-schedule: only with --plot"),
        (["--plot", "PLOT", "--plot-schedule", "tiny-1:cpsat"], "cpsat is not among the solvers"),
        (["--plot", "PLOT", "--plot-schedule", "tiny-9"], "no result for instance 'tiny-9'"),
    ],
)
def test_compare_plot_schedule_errors(extra, message, tmp_path, capsys):
    extra = [str(tmp_path / "f.png") if a == "PLOT" else a for a in extra]
    argv = ["compare", "instances/tiny-1.json", "--solvers", "fcfs", "--quiet", *extra]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
