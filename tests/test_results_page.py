"""The results pages' writer: header with command and date, sections replaced in place."""

from __future__ import annotations

import datetime
import sys

import pytest

from tests.conftest import ROOT

sys.path.append(str(ROOT / "benchmarks"))  # results_page is a benchmark helper
from results_page import command_line, stamp, tee_page, tee_section


def test_stamp_names_command_and_date():
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    text = stamp("python benchmarks/x.py --rows a")
    assert "`python benchmarks/x.py --rows a`" in text and today in text


def test_command_line_quotes():
    assert command_line("x.py", ["--tpots", "25ms,10ms", "a b"]) == (
        "python benchmarks/x.py --tpots 25ms,10ms 'a b'"
    )


def test_page_holds_the_output(tmp_path, capsys):
    page = tmp_path / "p.md"
    with tee_page(page, "Title", "python benchmarks/x.py"):
        print("row 1 2")
    assert capsys.readouterr().out == "row 1 2\n"  # still printed
    text = page.read_text()
    assert text.startswith("# Title\n") and "```text\nrow 1 2\n```" in text


def test_a_failed_run_keeps_the_previous_page(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("old")
    with pytest.raises(RuntimeError), tee_page(page, "T", "c"):
        print("half")
        raise RuntimeError
    assert page.read_text() == "old"


def test_sections_are_replaced_and_kept(tmp_path):
    page = tmp_path / "p.md"
    for key, out in (("b", "first b"), ("a", "first a"), ("b", "second b")):
        with tee_section(page, "Rows", key, f"cmd --rows {key}"):
            print(out)
    text = page.read_text()
    assert text.startswith("# Rows\n")
    assert "second b" in text and "first b" not in text and "first a" in text
    assert text.index("## a") < text.index("## b")
    assert text.count("cmd --rows b") == 1
