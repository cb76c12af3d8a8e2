"""The ``profile import`` and ``profile export`` subcommands."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from schedlab.cli import main
from tests.calibration.conftest import PROFILE, write_profile
from tests.calibration.timing_table import table_lines, write_table

LLAMA = "meta-llama/Llama-3.1-8B"


def _import(table, out, *extra):
    return main(
        [
            "profile",
            "import",
            str(table),
            "-o",
            str(out),
            "--model",
            LLAMA,
            "--hardware",
            "G",
            *extra,
        ]
    )


def _first(lines, prefix):
    """Index of the first line starting with ``prefix``."""
    return next(i for i, line in enumerate(lines) if line.startswith(prefix))


def test_import_then_calibrate(tmp_path, capsys):
    table = write_table(tmp_path / "mine.csv")
    out = tmp_path / "profile"
    assert _import(table, out, "--variant", "bf16") == 0
    text = capsys.readouterr().out
    assert "architecture llama (found from the table's ops)" in text
    assert "48 of 48 rows" in text and f"next: schedlab calibrate {out} -o MODEL.json" in text
    command = yaml.safe_load((out / "meta.yaml").read_text())["imported_from"]["command"]
    assert shlex.split(command)[:7] == [
        "schedlab",
        "profile",
        "import",
        str(table),
        "-o",
        str(out),
        "--model",
    ]
    assert main(["calibrate", str(out), "-o", str(tmp_path / "m.json"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "g_llama-3.1-8b" and report["iteration"]["n"] > 0


def _drop(prefix):
    return lambda lines: [line for line in lines if not line.startswith(prefix)]


def _edit(prefix, old, new):
    def edit(lines):
        i = _first(lines, prefix)
        return [*lines[:i], lines[i].replace(old, new), *lines[i + 1 :]]

    return edit


def _add(row):
    return lambda lines: [*lines, row]


#: (change to the hand-written table, extra options, what the one-line error says). A
#: ``{line}`` in the message stands for the table's name and the line of the first row
#: that starts with the case's last item.
CASES = {
    "missing column": (
        lambda ls: [",".join(x.split(",")[:-1]) for x in ls],
        (),
        "t.csv:1: missing column(s) time_us",
    ),
    "unknown column": (
        lambda ls: [ls[0] + ",note", *(x + "," for x in ls[1:])],
        (),
        "t.csv:1: unknown column(s) note",
    ),
    "unknown kind": (
        _edit("dense,act_fn,8,", "dense", "mlp"),
        (),
        "{line}: kind: expected one of",
        "mlp,",
    ),
    "not a number": (
        _edit("dense,act_fn,8,", ",5.0", ",fast"),
        (),
        "{line}: time_us: expected a number",
        "dense,act_fn,8,",
    ),
    "zero time": (
        _edit("dense,act_fn,8,", ",5.0", ",0"),
        (),
        "{line}: time_us: must be > 0",
        "dense,act_fn,8,",
    ),
    "negative time": (
        _edit("dense,act_fn,8,", ",5.0", ",-5"),
        (),
        "{line}: time_us: must be >= 0",
        "dense,act_fn,8,",
    ),
    "fractional size": (
        _edit("dense,act_fn,8,", ",8,", ",8.5,"),
        (),
        "{line}: tokens: expected an integer",
        "dense,act_fn,8.5,",
    ),
    "zero tokens": (
        _edit("dense,act_fn,8,", ",8,", ",0,"),
        (),
        "{line}: tokens: must be >= 1",
        "dense,act_fn,0,",
    ),
    "column of another kind": (
        _edit("dense,act_fn,8,", "8,,", "8,3,"),
        (),
        "{line}: sequences: does not apply to a dense row",
        "dense,act_fn,8,",
    ),
    "duplicate": (
        _add("dense,act_fn,8,,,,,,6.0"),
        (),
        "{line}: tp1 dense op=act_fn tokens=8 measured twice (first on line",
        "dense,act_fn,8,,,,,,6.0",
    ),
    "missing op, no architecture": (_drop("dense,act_fn,"), (), "are those of no op layout"),
    "missing op": (
        _drop("dense,act_fn,"),
        ("--architecture", "llama"),
        "t.csv: tp1: no dense rows for op(s) act_fn, which the 'llama' layout needs",
    ),
    "extra op": (
        _add("dense,mystery,8,,,,,,6.0"),
        ("--architecture", "llama"),
        "{line}: dense op 'mystery' is not in the 'llama' layout",
        "dense,mystery,",
    ),
    "one size": (
        lambda ls: [x for x in ls if not x.startswith("dense,act_fn,") or ",8," in x],
        (),
        "{line}: dense op 'act_fn' of tp1 is measured at one size only",
        "dense,act_fn,",
    ),
    "decode KV without decodes": (
        _edit("attention,,,,16,0,0,0,", ",16,0,0,0,", ",16,0,0,16,"),
        (),
        "{line}: kv_decode must be 0 exactly when n_decode is 0",
        "attention,,,,16,0,0,16,",
    ),
    "no decode-only rows": (
        _drop("attention,,,,0,"),
        (),
        "t.csv: tp1: the attention rows hold no complete grid",
    ),
    "declared grid not measured": (
        lambda ls: ls,
        ("--grid-chunks", "0, 64", "--grid-decodes", "0, 1", "--grid-kv", "0, 16"),
        "hold no complete grid (attention profile: needs mixed rows",
    ),
    "moe rows in a dense layout": (
        lambda ls: [
            ls[0] + ",activated_experts",
            *(x + "," for x in ls[1:]),
            "moe,,8,,,,,,5.0,8",
        ],
        ("--architecture", "llama"),
        "{line}: moe row, but the 'llama' layout has no expert block",
        "moe,",
    ),
    "partial grid": (lambda ls: ls, ("--grid-chunks", "0, 16"), "give all three or none"),
    "tp twice": (
        lambda ls: ["tp," + ls[0], *("1," + x for x in ls[1:])],
        ("--tp", "2"),
        "t.csv:1: has a tp column",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_import_refuses_bad_tables_in_one_line(tmp_path, capsys, case):
    change, options, message, *row = CASES[case]
    lines = change(table_lines())
    table = write_table(tmp_path / "t.csv", lines)
    if row:
        message = message.format(line=f"{table}:{_first(lines, row[0]) + 1}")
    assert _import(table, tmp_path / "out", *options) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_import_refuses_an_unknown_model_and_a_used_directory(tmp_path, capsys):
    table = write_table(tmp_path / "t.csv")
    args = ["profile", "import", str(table), "-o", str(tmp_path / "out"), "--hardware", "G"]
    assert main([*args, "--model", "acme/Nonesuch-1B"]) == 2
    assert "acme/Nonesuch-1B" in capsys.readouterr().err
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    assert main([*args, "--model", LLAMA]) == 2
    assert "exists and is not an empty directory" in capsys.readouterr().err
    assert main([*args[:2], str(tmp_path / "none.csv"), *args[3:], "--model", LLAMA]) == 2
    assert "none.csv" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # argparse's own one-line refusal
        main([*args, "--model", LLAMA, "--skew-alpha", "2"])
    assert exit_.value.code == 2 and "--skew-alpha" in capsys.readouterr().err


def test_export_prints_the_import_that_rebuilds_it(tmp_path, capsys):
    profile = write_profile(tmp_path / "profile")
    table = tmp_path / "table.csv"
    assert main(["profile", "export", str(profile), "-o", str(table)]) == 0
    text = capsys.readouterr().out
    rows = len((profile / "tp1" / "attention.csv").read_text().splitlines()) - 1
    assert f"tp1 attention: {rows} rows" in text and "left out" not in text
    rebuild = shlex.split(text.splitlines()[-1].removeprefix("rebuild: "))
    rebuild[rebuild.index("DIR")] = str(tmp_path / "copy")
    assert main(rebuild[1:]) == 0
    assert (
        main(["profile", "export", str(tmp_path / "copy"), "-o", str(tmp_path / "again.csv")]) == 0
    )
    assert (tmp_path / "again.csv").read_text() == table.read_text()


def test_export_refuses_to_overwrite_the_profile(tmp_path, capsys):
    profile = write_profile(tmp_path / "profile")
    target = profile / "tp1" / "dense.csv"
    before = target.read_text()
    assert main(["profile", "export", str(profile), "-o", str(target)]) == 2
    assert "would be overwritten" in capsys.readouterr().err and target.read_text() == before
    assert (
        main(["profile", "export", str(profile), "--tp", "2", "-o", str(tmp_path / "t.csv")]) == 2
    )
    assert "no profile for tensor parallelism 2" in capsys.readouterr().err


def test_export_of_a_real_profile_names_what_it_leaves_out(tmp_path, capsys):
    if not PROFILE.is_dir():
        pytest.skip("../shared/data profiles are not present")
    assert (
        main(["profile", "export", str(PROFILE), "--tp", "1", "-o", str(tmp_path / "t.csv")]) == 0
    )
    text = capsys.readouterr().out
    assert "tp1 dense: 1368 rows" in text and "tp2" not in text
    assert "left out (no place in a timing table): tp1/skew_fit.csv, tp1/skew.csv" in text
