"""The documentation site builds in strict mode: no broken link, every guide's example runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("mkdocs") is None, reason="the docs extra is not installed")
def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    site = tmp_path / "site"
    for page in ("index.html", "guides/certify/index.html", "proofs/sloweave/index.html"):
        assert (site / page).is_file(), page
    # The guides' examples ran: their printed output is in the page.
    assert "gap" in (site / "guides/certify/index.html").read_text(encoding="utf-8")
    assert "evictions" in (site / "guides/online/index.html").read_text(encoding="utf-8")
    _readable_offline(site)


def _readable_offline(site: Path) -> None:
    """Nothing a page shows comes from another host, and no docstring markup is left as
    text: the mathematics is MathML, cross-references are code, the hooks unpublished."""
    assert not (site / "hooks.py").exists()
    pages = {path: path.read_text(encoding="utf-8") for path in site.rglob("*.html")}
    fetched = re.compile(r'<(?:script|link|img)[^>]+(?:src|href)="(?:https?:)?//')
    roles = r":(?:math|func|class|mod|meth|attr|data|exc|obj):<code>"
    left = re.compile(r'class="arithmatex"|\\\(|\.\. math::|' + roles)
    assert [str(p) for p, text in pages.items() if fetched.search(text)] == []
    assert [str(p) for p, text in pages.items() if left.search(text)] == []
    reference = pages[site / "reference" / "calibration" / "index.html"]
    assert reference.count("<math ") > 5  # the cost model's formulas, as MathML
