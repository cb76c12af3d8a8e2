"""Reading a profile's meta.yaml with PyYAML: the real files, and errors that name the line."""

from __future__ import annotations

import time

import pytest

from schedlab.calibration.profiles import MAX_META_BYTES, read_meta_yaml
from schedlab.errors import DataNotFoundError, FileAccessError, FormatError

from .conftest import PROFILE


def test_the_shared_meta_reads_with_its_types():
    path = PROFILE / "meta.yaml"
    if not path.is_file():
        pytest.skip("../shared/data profiles are not present")
    meta = read_meta_yaml(path)
    assert meta["architecture"] == "llama" and meta["tp_degrees"] == [1, 2]
    assert meta["attention_grid"]["chunks"] == "0, 16-2048 x2"
    assert meta["skew_fit"]["per_tp"][1]["alpha_default"] == 0.0543


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("a: 1\n\tb: 2\n", 2, "that cannot start any token"),
        ("a:\n  b: 1\n    c: 2\n", 3, "mapping values are not allowed"),
        ("a: 1\na: 2\n", 2, "duplicate key 'a'"),
        ("a: [1, 2\n", 2, "expected ',' or ']'"),
        ("a: 'open\n", 2, "end of stream"),
    ],
)
def test_malformed_yaml_names_file_and_line(tmp_path, text, line, fragment):
    path = tmp_path / "meta.yaml"
    path.write_text(text)
    with pytest.raises(FormatError, match=rf"meta\.yaml:{line}: .*{fragment}"):
        read_meta_yaml(path)


def test_not_a_mapping_and_missing_file(tmp_path):
    path = tmp_path / "meta.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(FormatError, match="expected a mapping"):
        read_meta_yaml(path)
    with pytest.raises(DataNotFoundError):
        read_meta_yaml(tmp_path / "none.yaml")


def test_flow_mappings_and_anchors_are_valid_yaml(tmp_path):
    # constructs the old hand-written subset reader refused; an alias is not read
    path = tmp_path / "meta.yaml"
    path.write_text("base: &b {x: 1, y: [2, 3]}\nnote: |\n  two\n  lines\n")
    assert read_meta_yaml(path) == {"base": {"x": 1, "y": [2, 3]}, "note": "two\nlines\n"}
    path.write_text("base: &b {x: 1, y: [2, 3]}\ncopy: *b\n")
    with pytest.raises(FormatError, match=r"meta\.yaml:2: alias \*b "):
        read_meta_yaml(path)


def test_an_alias_bomb_is_refused_before_anything_is_expanded(tmp_path):
    # "billion laughs": nine levels of ten aliases each would build 10**9 lists; PyYAML's
    # safe_load expands them (it hung calibrate until killed at 120 s)
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for k in range(1, 10):
        prev, name = chr(ord("a") + k - 1), chr(ord("a") + k)
        levels.append(f"{name}: &{name} [{', '.join(['*' + prev] * 10)}]")
    path = tmp_path / "meta.yaml"
    path.write_text("\n".join(levels) + "\n")
    began = time.perf_counter()
    with pytest.raises(FormatError, match=r"meta\.yaml:2: alias \*a \(a profile's settings"):
        read_meta_yaml(path)
    assert time.perf_counter() - began < 5  # refused at the first alias, not expanded


def test_an_anchor_without_alias_is_plain_yaml(tmp_path):
    path = tmp_path / "meta.yaml"
    path.write_text("a: &x 1\nb: 2\n")
    assert read_meta_yaml(path) == {"a": 1, "b": 2}


def test_a_meta_yaml_above_its_cap_is_refused_unread(tmp_path):
    path = tmp_path / "meta.yaml"
    path.write_text("a: " + "x" * MAX_META_BYTES + "\n")
    with pytest.raises(FileAccessError, match=r"meta\.yaml: .* larger than the 1,048,576 bytes"):
        read_meta_yaml(path)
