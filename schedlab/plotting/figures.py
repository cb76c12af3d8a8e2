"""What every figure of schedlab needs: matplotlib, loaded lazily, a usable path, saving,
and the conventions that keep a figure publishable.

matplotlib is an optional dependency (the ``plot`` extra, ``pip install -e '.[plot]'``); it is
imported only when a figure is asked for, and paths are checked before any long computation
starts, so a typo in ``--plot`` fails at once instead of after the runs.

The conventions, shared by every figure: constrained layout (nothing drawn outside the
canvas), titles wrapped to the figure's width (:func:`fit_title`), legends either outside
the axes or placed by matplotlib where they cover the fewest points, and every reference
line named both in the legend and beside the line (:func:`reference_line`). Times are in
the unit of the table the same command prints.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

from schedlab.errors import DataNotFoundError, InputError, SchedlabError

__all__ = [
    "check_figure_path",
    "check_output_path",
    "fit_title",
    "pyplot",
    "reference_line",
    "save_figure",
]

# The mean advance of a DejaVu Sans character, in units of the font size; an upper
# estimate for the digits, lower-case letters and punctuation of schedlab's titles.
_CHAR_WIDTH_EM = 0.62


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the non-interactive Agg backend.

    Raises
    ------
    SchedlabError
        If matplotlib is not installed.
    """
    try:
        import matplotlib
    except ImportError:
        raise SchedlabError(
            "plot: matplotlib is not installed; install the plot extra (in a checkout: "
            "pip install -e '.[plot]')"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_output_path(path: str | Path, flag: str) -> Path:
    """``path`` if its folder exists, else a
    :class:`~schedlab.errors.DataNotFoundError` (a ``FileNotFoundError``) naming ``flag``."""
    path = Path(path)
    if not path.parent.is_dir():
        raise DataNotFoundError(f"{flag}: folder {path.parent} does not exist")
    return path


def check_figure_path(path: str | Path, flag: str) -> Path:
    """``path`` if matplotlib can write its format and its folder exists (``-``, standard
    output, is refused: a figure is no text)."""
    if str(path) == "-":
        raise InputError(
            f"{flag} -: a figure is written to a file (PNG, PDF, SVG...), not "
            "to standard output; name a file"
        )
    path = check_output_path(path, flag)
    formats = pyplot().figure().canvas.get_supported_filetypes()
    suffix = path.suffix.lstrip(".").lower()
    if suffix not in formats:
        raise InputError(
            f"{flag}: cannot write a figure as {path.name!r}; use one of "
            f"{', '.join('.' + f for f in sorted(formats))}"
        )
    return path


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Write ``fig`` to ``path`` (format by suffix) and close it."""
    out = Path(path)
    fig.savefig(out, dpi=dpi)
    pyplot().close(fig)
    return out


def fit_title(fig: Any, text: str, fontsize: float = 10.0) -> Any:
    """Set ``text`` as ``fig``'s title, each line wrapped at a space to the figure's width.

    A line of :math:`c` characters at font size :math:`f` points is about
    :math:`0.62\\,c f` points wide, so a figure :math:`W` inches wide takes
    :math:`\\lfloor 72 W / (0.62 f) \\rfloor` characters a line, less a margin of 4.
    Returns the title's ``Text``.
    """
    width = int(72 * fig.get_figwidth() / (_CHAR_WIDTH_EM * fontsize)) - 4
    lines = [textwrap.fill(line, width, break_on_hyphens=False) for line in text.split("\n")]
    return fig.suptitle("\n".join(lines), fontsize=fontsize)


def reference_line(ax: Any, y: float, label: str, **style: Any) -> Any:
    """A horizontal line at ``y`` across ``ax``, named in the legend and beside the line.

    The name is written inside the axes at the left end, just above the line (below it
    when the line is in the top tenth of the axes).
    """
    style = {"color": "grey", "linestyle": ":", "linewidth": 1.2, **style}
    line = ax.axhline(y, label=label, **style)
    low, high = ax.get_ylim()
    above = (y - low) < 0.9 * (high - low)
    ax.annotate(
        label,
        xy=(0.01, y),
        xycoords=ax.get_yaxis_transform(),
        xytext=(0, 3 if above else -3),
        textcoords="offset points",
        va="bottom" if above else "top",
        fontsize=8,
        color=style["color"],
    )
    return line
