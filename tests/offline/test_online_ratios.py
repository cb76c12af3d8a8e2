"""``benchmarks/online_ratios.py`` runs at a tiny size and writes what its page promises."""

from __future__ import annotations

from tests.conftest import load_benchmark


def _column(text: str, section: str, title: str) -> list[str]:
    """The cells of column ``title`` in the first table after heading ``section``."""
    rows = text.split(section, 1)[1].split("\n\n")[1].splitlines()
    head = [cell.strip() for cell in rows[0].strip("|").split("|")]
    k = head.index(title)
    return [row.strip("|").split("|")[k].strip() for row in rows[2:]]


def test_the_benchmark_runs_small(tmp_path, data_dir, capsys):
    bench = load_benchmark("online_ratios")
    page, figure = tmp_path / "page.md", tmp_path / "img" / "ratios.png"
    argv = ["--n", "12", "--kv-tokens", "3000", "--alphas", "0.5,1"]
    argv += ["--sources", "sharegpt"]
    argv += ["--no-headline", "--page", str(page), "--figure", str(figure)]
    assert bench.main(argv) == 0
    text = page.read_text()
    for heading in ("## Backlogs", "## Arrival streams", "## Beside the paper", "## Every run"):
        assert heading in text, heading
    assert "--n 12 --kv-tokens 3000 --alphas 0.5,1 --sources sharegpt" in text
    assert figure.stat().st_size > 10_000
    # a backlog and a stream, five prediction models, four algorithms
    ratios = [float(cell) for cell in _column(text, "## Every run", "×bound")]
    assert len(ratios) == 2 * 5 * len(bench.ALGORITHMS)
    # the hindsight bound holds for every online schedule
    assert min(ratios) >= 1.0
    printed = capsys.readouterr().out
    assert "sharegpt backlog" in printed and "total wall" in printed


def test_the_benchmark_refuses_an_unknown_source(capsys):
    bench = load_benchmark("online_ratios")
    assert bench.main(["--sources", "lmsys"]) == 2
    assert "lmsys" in capsys.readouterr().err
