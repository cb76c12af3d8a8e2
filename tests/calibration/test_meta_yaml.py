"""Reading a profile's meta.yaml with PyYAML: the real files, and errors that name the line."""

from __future__ import annotations

import pytest

from schedlab.calibration.profiles import read_meta_yaml
from schedlab.errors import DataNotFoundError, FormatError

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
    # constructs the old hand-written subset reader refused
    path = tmp_path / "meta.yaml"
    path.write_text("base: &b {x: 1, y: [2, 3]}\ncopy: *b\nnote: |\n  two\n  lines\n")
    assert read_meta_yaml(path) == {
        "base": {"x": 1, "y": [2, 3]},
        "copy": {"x": 1, "y": [2, 3]},
        "note": "two\nlines\n",
    }
