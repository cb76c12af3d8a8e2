"""The timing table: import into a profile directory, export from one, both ways exact."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from schedlab.calibration.fit import calibrate
from schedlab.calibration.profile_exchange import export_timing_table, import_timing_table
from schedlab.calibration.profile_table import read_timing_table
from schedlab.errors import FormatError, InputError
from tests.calibration.conftest import DATA_DIR, SKEW_ALPHA, attention_us, write_profile
from tests.calibration.timing_table import dense_us, head_us, table_lines, write_table

LLAMA = "meta-llama/Llama-3.1-8B"
#: Batches (decodes, their KV in total, chunks) on which two fitted models are compared:
#: decodes only, a chunk only, mixed, and beyond every profiled size.
BATCHES = (
    (1, 100, ()),
    (64, 64 * 700, ()),
    (0, 0, ((512, 0),)),
    (0, 0, ((96, 3000),)),
    (17, 17 * 1500, ((333, 1200),)),
    (128, 128 * 4096, ((2048, 8192),)),
    (300, 300 * 20000, ((5000, 30000),)),
)


def _without_provenance(model_dict: dict) -> dict:
    return {
        k: v for k, v in model_dict.items() if k not in ("source", "license", "sources", "skew")
    }


def test_a_hand_written_table_calibrates_to_its_numbers(tmp_path):
    table = write_table(tmp_path / "mine.csv")
    summary = import_timing_table(table, tmp_path / "profile", model=LLAMA, hardware="MYGPU")
    assert summary.architecture == "llama" and summary.inferred
    assert summary.grid_rows[1] == summary.counts[(1, "attention")] == 48
    model, report = calibrate(tmp_path / "profile", LLAMA)
    # Linear op rows and an attention grid point are reproduced exactly: one iteration of
    # 2 decodes at 32 KV each and a chunk of 32 on 16 cached tokens (N = 34, S = 3) costs
    # 32 layers of 8 op calls plus 2 once-per-forward ops, the head, and 32 attentions.
    expected_us = (32 * 8 + 2) * dense_us(34) + 2 * head_us(3) + 32 * attention_us(32, 16, 2, 32)
    assert model.iteration_time(2, 64, [(32, 16)]) == pytest.approx(expected_us * 1e-6, abs=1e-9)
    assert model.name == "mygpu_llama-3.1-8b" and model.skew is None
    assert report.ops["qkv_proj"].worst_pct == pytest.approx(0, abs=1e-9)


def test_meta_yaml_records_where_the_profile_came_from(tmp_path):
    table = write_table(tmp_path / "mine.csv")
    out = tmp_path / "profile"
    import_timing_table(
        table,
        out,
        model=LLAMA,
        hardware="MYGPU",
        variant="bf16",
        skew_alpha=0.1,
        command="schedlab profile import mine.csv -o profile",
    )
    meta = yaml.safe_load((out / "meta.yaml").read_text())
    digest = hashlib.sha256(table.read_bytes()).hexdigest()
    assert meta["imported_from"] == {
        "file": str(table),
        "sha256": digest,
        "rows": len(table_lines()) - 1,
        "command": "schedlab profile import mine.csv -o profile",
    }
    assert meta["skew_fit"]["per_tp"][1]["alpha_default"] == 0.1
    assert (meta["model"], meta["hardware"], meta["variant"]) == (LLAMA, "MYGPU", "bf16")
    model, _ = calibrate(out, LLAMA)
    assert digest in model.source and "MIT" not in model.license
    assert model.skew is not None and model.skew.default == 0.1


def test_synthetic_profile_round_trip_is_exact(tmp_path):
    """Export the synthetic profile, import it with the printed options: the same model."""
    original = write_profile(tmp_path / "original")
    exported = export_timing_table(original, tmp_path / "table.csv")
    assert exported.left_out == ()
    options = dict(zip(exported.import_options[::2], exported.import_options[1::2], strict=True))
    import_timing_table(
        exported.output,
        tmp_path / "copy",
        model=options["--model"],
        hardware=options["--hardware"],
        architecture=options["--architecture"],
        variant=options["--variant"],
        grid=(options["--grid-chunks"], options["--grid-decodes"], options["--grid-kv"]),
        skew_alpha=SKEW_ALPHA,
    )
    a, report_a = calibrate(original, LLAMA)
    b, report_b = calibrate(tmp_path / "copy", LLAMA)
    assert _without_provenance(a.to_dict()) == _without_provenance(b.to_dict())
    assert a.skew is not None and b.skew is not None and a.skew.default == b.skew.default
    assert report_a.to_dict() == report_b.to_dict()


@pytest.mark.parametrize(
    ("path", "model", "tps"),
    [
        ("RTXPRO6000/meta-llama/Llama-3.1-8B/bf16", LLAMA, (1,)),
        (
            "RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16",
            "Qwen/Qwen3-30B-A3B-Instruct-2507",
            (2,),
        ),
    ],
)
def test_real_profile_round_trip_predicts_the_same_iterations(tmp_path, path, model, tps):
    """A shared profile, exported and imported back, calibrates to the same model (but the
    per-bucket skew table, which a timing table does not carry)."""
    root = DATA_DIR / "profiles" / "llmservingsim" / path
    if not root.is_dir():
        pytest.skip("../shared/data profiles are not present")
    exported = export_timing_table(root, tmp_path / "table.csv")
    assert "tp1/skew_fit.csv" in exported.left_out
    options = exported.import_options
    grid = tuple(
        options[options.index(flag) + 1]
        for flag in ("--grid-chunks", "--grid-decodes", "--grid-kv")
    )
    import_timing_table(
        exported.output, tmp_path / "copy", model=model, hardware="RTXPRO6000", grid=grid
    )
    for tp in tps:
        a, report_a = calibrate(root, model, tp=tp)
        b, report_b = calibrate(tmp_path / "copy", model, tp=tp)
        for n, kv, chunks in BATCHES:
            assert b.iteration_time(n, kv, chunks) == a.iteration_time(n, kv, chunks)
        assert _without_provenance(a.to_dict()) == _without_provenance(b.to_dict())
        assert report_a.iteration == report_b.iteration and report_a.margin_s == report_b.margin_s


def test_read_checks_rows(tmp_path):
    lines = table_lines()
    table = read_timing_table(write_table(tmp_path / "t.csv", lines))
    assert table.tps == (1,) and len(table) == len(lines) - 1
    with pytest.raises(FormatError, match=r"t\.csv:1: has a tp column"):
        read_timing_table(
            write_table(tmp_path / "t.csv", ["tp," + lines[0], *("1," + x for x in lines[1:])]),
            tp=2,
        )
    tp2 = read_timing_table(write_table(tmp_path / "t.csv", lines), tp=2)
    assert tp2.tps == (2,)
    with pytest.raises(InputError, match="tp: expected an integer from 1 to 128, got 129"):
        read_timing_table(tmp_path / "t.csv", tp=129)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("dense,qkv_proj,1e15,,,,,,3.0", r":2: tokens: must be at most 1e\+08, got '1e15'"),
        ("dense,qkv_proj,100000001,,,,,,3.0", r":2: tokens: must be at most 1e\+08"),
        ("per_sequence,lm_head,,1e9,,,,,3.0", r":2: sequences: must be at most 1e\+08"),
        ("attention,,,,16,0,1,1e15,3.0", r":2: kv_decode: must be at most 1e\+08"),
        ("attention,,,,16,-16,0,0,3.0", r":2: kv_prefill: must be >= 0, got '-16'"),
    ],
)
def test_a_count_out_of_range_is_refused_by_line(tmp_path, row, message):
    lines = table_lines()
    with pytest.raises(FormatError, match=rf"t\.csv{message}"):
        read_timing_table(write_table(tmp_path / "t.csv", [lines[0], row, *lines[1:]]))
    assert read_timing_table(write_table(tmp_path / "t.csv", [lines[0], *lines[1:]]))


def test_import_refuses_bad_options(tmp_path):
    table = write_table(tmp_path / "t.csv")
    with pytest.raises(InputError, match="skew alpha"):
        import_timing_table(table, tmp_path / "p", model=LLAMA, hardware="G", skew_alpha=1.5)
    with pytest.raises(InputError, match="cannot read grid item"):
        import_timing_table(
            table, tmp_path / "p", model=LLAMA, hardware="G", grid=("0, 16-x", "0, 1", "0, 16")
        )
    with pytest.raises(InputError, match="hardware: empty"):
        import_timing_table(table, tmp_path / "p", model=LLAMA, hardware=" ")
    assert not (tmp_path / "p").exists()  # nothing written before every check passed


def test_skew_measurements_travel_with_an_import(tmp_path):
    """A profile's skew.csv given back with the import: the same tested skew correction."""
    root = DATA_DIR / "profiles" / "llmservingsim" / "RTX4090/meta-llama/Llama-3.1-8B/bf16"
    if not root.is_dir():
        pytest.skip("../shared/data profiles are not present")
    exported = export_timing_table(root, tmp_path / "table.csv")
    options = exported.import_options
    grid = tuple(
        options[options.index(flag) + 1]
        for flag in ("--grid-chunks", "--grid-decodes", "--grid-kv")
    )
    import_timing_table(
        exported.output,
        tmp_path / "copy",
        model=LLAMA,
        hardware="RTX4090",
        grid=grid,
        skew_measurements=root / "tp1" / "skew.csv",
    )
    a, report_a = calibrate(root, LLAMA)
    b, report_b = calibrate(tmp_path / "copy", LLAMA)
    assert report_b.skew_choice == report_a.skew_choice != ""
    assert report_b.skew_held_out == report_a.skew_held_out
    assert a.skew == b.skew
    bad = tmp_path / "skew.csv"
    bad.write_text(
        "n,ratio,pc,kp,kvs,kv_big,kv_mean,t_mean_us,t_max_us,t_skew_us\n"
        "4,0.5,0,0,512,128,320,10,12,11\n"
    )
    with pytest.raises(FormatError, match=r"skew.csv:2: expected n >= 2 decodes"):
        import_timing_table(
            exported.output,
            tmp_path / "again",
            model=LLAMA,
            hardware="G",
            grid=grid,
            skew_measurements=bad,
        )
