"""Strict JSON: what Python's ``json`` accepts silently is refused, naming the place."""

from __future__ import annotations

import pytest

from schedlab.errors import DataNotFoundError, FormatError
from schedlab.json_files import parse_json, read_json
from schedlab.llm.traces import jsonl_rows


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"memory": 1, "memory": 2}', "f.json:1: invalid JSON .key 'memory' given twice"),
        ('{"a": {"b": 1, "b": 1}}', "key 'b' given twice"),
        ('{"x": NaN}', "NaN is not JSON"),
        ("[Infinity]", "Infinity is not JSON"),
        ("[-Infinity]", "-Infinity is not JSON"),
        ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
        ('{"a": 1,\n "b": }', r"f.json:2:7: invalid JSON \(Expecting value\)"),
    ],
)
def test_what_python_would_accept_or_crash_on(text, message):
    with pytest.raises(FormatError, match=message):
        parse_json(text, "f.json")


def test_strict_json_still_reads_json():
    assert parse_json('{"a": [1, 2.5, null, true], "b": {"a": 1}}', "f") == {
        "a": [1, 2.5, None, True],
        "b": {"a": 1},
    }


def test_read_json_names_a_directory_and_a_missing_file(tmp_path):
    with pytest.raises(FormatError, match=r"is a directory \(instance file expected\)"):
        read_json(tmp_path, "instance file")
    with pytest.raises(DataNotFoundError, match="no such instance file"):
        read_json(tmp_path / "none.json", "instance file")


def test_jsonl_errors_count_the_file_s_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 1, "a": 2}\n')
    with pytest.raises(FormatError, match=r"t.jsonl:3: invalid JSON \(key 'a' given twice"):
        list(jsonl_rows(path, ("a",)))
    path.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(FormatError, match=r"t.jsonl:2:7: invalid JSON"):
        list(jsonl_rows(path, ("a",)))


def test_positions_the_parser_does_not_know_are_not_made_up():
    # a key twice on line 3 of a file: the hook cannot tell the line, so none is named
    with pytest.raises(FormatError, match=r"^f\.json: invalid JSON \(key 'b' given twice"):
        parse_json('{"a": 1,\n "x": {"b": 1,\n "b": 2}}', "f.json")


def test_a_lone_surrogate_is_refused_a_pair_is_text():
    with pytest.raises(FormatError, match="lone surrogate"):
        parse_json('{"name": "\\ud800"}', "f.json")
    assert parse_json('{"name": "\\ud83d\\ude00"}', "f.json") == {"name": "\U0001f600"}


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (None, r"^instance file: expected a path, got NoneType$"),
        (b"x.json", r"^instance file: expected a path, got bytes$"),
        ("/tmp/" + "a" * 5000, r": cannot be read \(File name too long\)$"),
    ],
)
def test_what_cannot_be_a_file_is_refused_in_one_line(path, message):
    with pytest.raises(FormatError, match=message):
        read_json(path, "instance file")
