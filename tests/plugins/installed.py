"""The example third-party package (``tests/plugins/example``), installed for the tests.

It is installed as pip installs a package, into a directory on ``sys.path``: its module,
and a ``.dist-info`` holding its metadata and the entry points of its ``pyproject.toml``,
which :mod:`importlib.metadata` (and so :mod:`schedlab.plugins`) reads. ``tests/conftest.py``
installs it for the whole run, so every registry the tests see includes its entries, and
subprocesses see it through ``PYTHONPATH``.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

__all__ = ["EXAMPLE", "install", "project", "write_dist_info"]

#: The example package's project directory.
EXAMPLE = Path(__file__).resolve().parent / "example"


def project() -> dict[str, object]:
    """The ``[project]`` table of its ``pyproject.toml``."""
    text = (EXAMPLE / "pyproject.toml").read_text(encoding="utf-8")
    table: dict[str, object] = tomllib.loads(text)["project"]
    return table


def write_dist_info(
    site: Path, name: str, version: str, groups: dict[str, dict[str, str]]
) -> None:
    """The ``.dist-info`` of distribution ``name`` in ``site``: its metadata and the entry
    points ``groups`` (group -> entry-point name -> ``module:object``)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    lines: list[str] = []
    for group, points in groups.items():
        lines += [f"[{group}]", *(f"{key} = {value}" for key, value in points.items()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")


def install(site: Path) -> None:
    """Install the example package into ``site`` (a directory to put on ``sys.path``)."""
    meta = project()
    groups = meta["entry-points"]
    assert isinstance(groups, dict)
    write_dist_info(site, str(meta["name"]), str(meta["version"]), groups)
    shutil.copytree(EXAMPLE / "schedlab_example_plugin", site / "schedlab_example_plugin")
