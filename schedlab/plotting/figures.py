"""What every figure of schedlab needs: matplotlib, loaded lazily, a usable path, saving.

matplotlib is an optional dependency (``pip install 'schedlab[plot]'``); it is imported
only when a figure is asked for, and paths are checked before any long computation
starts, so a typo in ``--plot`` fails at once instead of after the runs.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from schedlab.errors import DataNotFoundError, InputError, SchedlabError

__all__ = ["check_figure_path", "check_output_path", "pyplot", "save_figure"]


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
            "plot: matplotlib is not installed; pip install 'schedlab[plot]'"
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
    """``path`` if matplotlib can write its format and its folder exists."""
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
