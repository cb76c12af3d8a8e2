import json
from importlib import resources

import numpy as np
import pytest

from schedlab.errors import FormatError, UnknownNameError
from schedlab.llm.lengths import (
    LengthTable,
    builtin_table,
    builtin_table_names,
    derive_tables,
    main,
)
from schedlab.llm.traces import read_trace


def test_shipped_tables_are_exactly_derived_from_the_traces(data_dir):
    shipped = json.loads(
        resources.files("schedlab").joinpath("data/length_tables.json").read_text()
    )
    assert derive_tables(data_dir) == shipped


def test_every_table_names_source_and_license():
    assert set(builtin_table_names()) == {"sharegpt", "arxiv", "azure-code", "azure-conv"}
    for name in builtin_table_names():
        table = builtin_table(name)
        assert table.source.startswith("traces/") and table.license


def test_sampling_is_seeded_and_follows_the_trace(data_dir):
    table = builtin_table("arxiv")
    p1, o1 = table.sample(5000, np.random.default_rng(7))
    p2, o2 = table.sample(5000, np.random.default_rng(7))
    assert (p1 == p2).all() and (o1 == o2).all()
    assert (o1 >= 1).all()
    trace = read_trace(
        data_dir / "traces" / "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv"
    )
    # Medians within 5% of the real trace, and the prompt/output correlation's sign kept
    # (long arXiv prompts come with shorter summaries).
    assert abs(np.median(p1) / np.median(trace.prompt) - 1) < 0.05
    assert abs(np.median(o1) / np.median(trace.output) - 1) < 0.05
    real = np.corrcoef(trace.prompt, trace.output)[0, 1]
    ours = np.corrcoef(p1, o1)[0, 1]
    assert np.sign(real) == np.sign(ours) and abs(real - ours) < 0.15


def test_errors():
    with pytest.raises(UnknownNameError, match="known: arxiv"):
        builtin_table("nope")
    with pytest.raises(FormatError, match="malformed length table"):
        LengthTable.from_dict({"name": "x"})
    good = builtin_table("sharegpt").to_dict()
    good["output_quantiles"] = good["output_quantiles"][:3]
    with pytest.raises(FormatError, match="output_quantiles must be"):
        LengthTable.from_dict(good)


def test_the_maintenance_entry_point(tmp_path, capsys, data_dir):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "DATA_DIR" in capsys.readouterr().out
    assert main([str(tmp_path)]) == 2  # no traces there: one line, no traceback
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such trace file" in err
    out = tmp_path / "tables.json"
    assert main([str(data_dir), "-o", str(out)]) == 0
    shipped = resources.files("schedlab").joinpath("data/length_tables.json").read_text()
    assert out.read_text() == shipped
