"""Strict JSON: what Python's ``json`` accepts silently is refused, naming the place."""

from __future__ import annotations

import io
import sys

import pytest

from schedlab.errors import DataNotFoundError, FileAccessError, FormatError, InputTypeError
from schedlab.json_files import (
    check_keys,
    check_size,
    parse_json,
    read_bytes,
    read_json,
    write_text,
)
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
    ("path", "error", "message"),
    [
        (None, InputTypeError, r"^instance file: expected a path, got NoneType$"),
        (b"x.json", InputTypeError, r"^instance file: expected a path, got bytes$"),
        ("/tmp/" + "a" * 5000, FileAccessError, r": cannot be read \(File name too long\)$"),
    ],
)
def test_what_cannot_be_a_file_is_refused_in_one_line(path, error, message):
    with pytest.raises(error, match=message):
        read_json(path, "instance file")


def test_errors_are_also_the_builtin_exceptions_python_expects(tmp_path):
    with pytest.raises(TypeError):
        read_json(None, "instance file")
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "none.json", "instance file")
    with pytest.raises(OSError, match="cannot be read"):
        read_json("/tmp/" + "a" * 5000, "instance file")
    with pytest.raises(FileNotFoundError, match=r"no folder .*nowhere to write the instance"):
        write_text(tmp_path / "nowhere" / "x.json", "{}", "instance")
    with pytest.raises(FileAccessError, match="cannot be written"):
        write_text(tmp_path, "{}", "instance")


def test_a_file_above_the_cap_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 600 + "0]")
    assert len(read_json(big)) == 601
    with pytest.raises(
        FileAccessError, match=r"big.json: 1,203 bytes or more, larger than the 1,000"
    ):
        read_bytes(big, "instance file", limit=1000)
    with pytest.raises(FileAccessError, match="larger than the 1,000 bytes"):
        check_size(big, "trace", limit=1000)
    assert check_size(big, "trace", limit=2000) == big


def test_a_device_without_a_size_is_read_only_up_to_the_cap():
    # /dev/zero has no size to look at and never ends: it is read up to the cap, refused
    with pytest.raises(FileAccessError, match="/dev/zero: 11 bytes or more"):
        read_bytes("/dev/zero", "instance file", limit=10)


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_a_dash_and_dev_stdin_read_standard_input(name, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"a": [1, 2]}')))
    assert read_json(name) == {"a": [1, 2]}


def test_unknown_keys_are_named_with_the_known_ones():
    check_keys({"margin_s": 0}, ("kind", "margin_s"), "cm.json")
    with pytest.raises(
        FormatError, match=r"^cm.json: unknown key\(s\) margn_s; known: kind, margin_s$"
    ):
        check_keys({"margn_s": 0}, ("kind", "margin_s"), "cm.json")
