"""The YAML-subset reader: the constructs meta.yaml uses, and refusal of the rest."""

from __future__ import annotations

import pytest

from schedlab.calibration.yaml_subset import parse_yaml_subset, read_yaml_subset
from schedlab.errors import DataNotFoundError, FormatError

from .conftest import PROFILE


def test_scalars_nesting_and_sequences():
    text = """\
a: 1            # int
b: 0.5
c: '13.0'       # quoted: stays a string
d: true
e: ~
f: 0, 16-2048 x2
g: [1, x, 2.5]
h:
  i:
    j: "q # not a comment"
  k: []
l:
  - 1
  - two
1:
  m: 2
"""
    assert parse_yaml_subset(text) == {
        "a": 1,
        "b": 0.5,
        "c": "13.0",
        "d": True,
        "e": None,
        "f": "0, 16-2048 x2",
        "g": [1, "x", 2.5],
        "h": {"i": {"j": "q # not a comment"}, "k": []},
        "l": [1, "two"],
        1: {"m": 2},
    }


def test_empty_value_without_block_is_null():
    assert parse_yaml_subset("a:\nb: 2\n") == {"a": None, "b": 2}


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("a: 1\n\tb: 2\n", 2, "tabs"),
        ("a:\n  b: 1\n    c: 2\n", 3, "indentation"),
        ("a: {x: 1}\n", 1, "unsupported"),
        ("a: 1\na: 2\n", 2, "duplicate key"),
        ("a: [1, 2\n", 1, "flow sequence"),
        ("just text\n", 1, "key: value"),
        ("a:\n  - b: 1\n", 2, "scalars"),
        ("a: 'open\n", 1, "unterminated"),
    ],
)
def test_malformed_input_names_the_line(text, line, fragment):
    with pytest.raises(FormatError, match=rf"meta\.yaml:{line}: .*{fragment}"):
        parse_yaml_subset(text, "meta.yaml")


def test_missing_file(tmp_path):
    with pytest.raises(DataNotFoundError):
        read_yaml_subset(tmp_path / "none.yaml")


def test_agrees_with_pyyaml_on_the_shared_meta():
    yaml = pytest.importorskip("yaml")
    path = PROFILE / "meta.yaml"
    if not path.is_file():
        pytest.skip("../shared/data profiles are not present")
    assert read_yaml_subset(path) == yaml.safe_load(path.read_text())
