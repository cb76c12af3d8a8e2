"""MkDocs hook: the proofs (kept in ``proofs/`` at the repository root, where tests name
them) become pages of the site, with an index."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def on_files(files: Files, config) -> Files:
    proofs = sorted((ROOT / "proofs").glob("*.md"))
    lines = [
        "# Proofs",
        "",
        "Each proof states a claim of the toolkit and names the tests that check it.",
        "",
    ]
    for path in proofs:
        files.append(File.generated(config, f"proofs/{path.name}", abs_src_path=str(path)))
        lines.append(f"- [{_title(path)}]({path.name})")
    files.append(File.generated(config, "proofs/index.md", content="\n".join(lines) + "\n"))
    return files
