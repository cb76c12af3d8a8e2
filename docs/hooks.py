"""MkDocs hooks: the proofs (kept in ``proofs/`` at the repository root, where tests name
them) become pages of the site, with an index; and every page is made readable offline.

Offline: mathematics is written as MathML when the site is built (``latex2mathml``), which
browsers render without a script, instead of TeX that MathJax would typeset from a CDN.
The docstrings' reStructuredText (numpydoc) that mkdocstrings shows as text is turned into
what it means: ``.. math::`` blocks and ``:math:`` roles into MathML, cross-reference
roles (``:func:``, ``:class:``, ...) into links to the object where the site documents it
(code otherwise), the name after ``~`` shortened to its last part as Sphinx does.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from latex2mathml.converter import convert
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]

#: TeX that ``latex2mathml`` does not know, and what it does know in its place: ``\arg``,
#: and a control space (a backslash and a space, not the end of a ``\\`` line break).
_REWRITES = ((re.compile(r"\\arg\b"), r"\\operatorname{arg}"), (re.compile(r"(?<!\\)\\ "), r"\\;"))

#: pymdownx.arithmatex's generic output, inline and display.
_ARITHMATEX = re.compile(
    r'<span class="arithmatex">\\\((.*?)\\\)</span>|<div class="arithmatex">\\\[(.*?)\\\]</div>',
    re.S,
)
#: A docstring's ``.. math::`` block as mkdocstrings renders it: the directive as a
#: paragraph, then its body as a code block.
_MATH_BLOCK = re.compile(
    r"<p>\.\. math::</p>\s*(?:<div[^>]*>)?<pre[^>]*>(?:<span></span>)?<code>(.*?)</code></pre>"
    r"(?:</div>)?",
    re.S,
)
_MATH_ROLE = re.compile(r":math:<code>(.*?)</code>", re.S)
_XREF_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):<code>(~?)([\w.]+)</code>")


def _mathml(tex: str, display: bool) -> str:
    tex = html.unescape(re.sub(r"<[^>]+>", "", tex)).strip()
    for old, new in _REWRITES:
        tex = old.sub(new, tex)
    mathml = convert(tex, display="block" if display else "inline")
    return mathml.replace("<mi>&</mi>", "")  # an alignment tab, which it leaves as text


def _name(match: re.Match[str]) -> str:
    """A cross-reference role as a link where the site documents the object (autorefs
    resolves it after every page is built), else as the name in code."""
    short, path = match.groups()
    shown = path.rsplit(".", 1)[-1] if short else path
    return f'<autoref identifier="{path}" optional><code>{shown}</code></autoref>'


def on_page_content(content: str, page, config, files) -> str:
    content = _ARITHMATEX.sub(
        lambda m: _mathml(
            m.group(1) if m.group(1) is not None else m.group(2), m.group(2) is not None
        ),
        content,
    )
    content = _MATH_BLOCK.sub(lambda m: _mathml(m.group(1), True), content)
    content = _MATH_ROLE.sub(lambda m: _mathml(m.group(1), False), content)
    return _XREF_ROLE.sub(_name, content)


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
