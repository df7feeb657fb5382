"""The README and the guide stay readable and whole: the README fits its budget, the guide builds
with ``mkdocs build --strict`` (a broken link, anchor or page left out of the nav fails), and
every link the README makes into the repository lands on a file and a heading that exist."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from streaming.workflows.blocks import BLOCKS

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 300
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    headings = re.findall(r"^#+\s+(.+?)\s*$", text, flags=re.M)
    return {slugify(heading, "-") for heading in headings}


def test_readme_fits_on_a_few_screens() -> None:
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/guide/"


def test_readme_links_land() -> None:
    broken = []
    for target in _LINK.findall((ROOT / "README.md").read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        page = ROOT / path
        if not page.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and anchor not in _anchors(page):
            broken.append(f"{target}: no heading #{anchor} in {path}")
    assert not broken, broken


@pytest.mark.timeout(120)
def test_the_guide_builds_strictly(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
         "-f", str(ROOT / "docs" / "mkdocs.yml"), "-d", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=110,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    site = tmp_path / "site"
    assert (site / "index.html").exists()
    for page in sorted((ROOT / "docs" / "guide").glob("*.md")):
        if page.stem != "index":
            assert (site / page.stem / "index.html").exists(), f"{page.name} was not built"
    # The README is the site's "Start here" (docs/hooks.py), its links the site's own.
    start = (site / "start" / "index.html").read_text()
    assert "pip install . &amp;&amp; visionstream serve" in start and "docs/guide/" not in start
    # Each block is an entry of the site's search of its own: "dynamic_crop" finds one.
    index = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    blocks = {e["title"] for e in index if e["location"].startswith("blocks/#")}
    assert "<code>roboflow_core/dynamic_crop@v1</code>" in blocks
    assert len(blocks) == len(set(BLOCKS.values())), "a block without its own heading"
    assert not _broken_anchors(site), _broken_anchors(site)
    run_on = [
        f"{html.relative_to(site)}: {line}"
        for html in sorted(site.rglob("*.html"))
        for line in _lists_in_paragraphs(html.read_text())
    ]
    assert not run_on, "lists rendered as text (a list needs a blank line before it):\n" + (
        "\n".join(run_on)
    )


_HREF = re.compile(r'href="([^"#:]*)#([^"]+)"')
_ID = re.compile(r'id="([^"]+)"')


def _broken_anchors(site: Path) -> list[str]:
    """Links between the built pages whose ``#anchor`` no element of the target has (the
    build passes them: a renamed heading left its old links pointing nowhere)."""
    texts = {page: page.read_text() for page in site.rglob("*.html")}
    ids = {page: set(_ID.findall(text)) for page, text in texts.items()}
    broken = []
    for page, text in texts.items():
        for target, anchor in _HREF.findall(text):
            landing = (page.parent / target).resolve() if target else page
            if landing.is_dir():
                landing = landing / "index.html"
            if landing in ids and anchor not in ids[landing]:
                broken.append(f"{page.relative_to(site)}: {target}#{anchor}")
    return broken


class _Paragraphs(HTMLParser):
    """The text of every paragraph and list item of a page as the browser gets it, each
    without the blocks inside it (a nested list is its own items) or code blocks."""

    _BLOCKS = ("p", "li")

    def __init__(self) -> None:
        super().__init__()
        self.paragraphs: list[str] = []
        self._open: list[int] = []
        self._code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._BLOCKS:
            self._open.append(len(self.paragraphs))
            self.paragraphs.append("")
        elif tag == "pre":  # a code block (superfences may put one inside a <p>)
            self._code += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self._BLOCKS and self._open:
            self._open.pop()
        elif tag == "pre":
            self._code = max(0, self._code - 1)

    def handle_data(self, data: str) -> None:
        if self._open and not self._code:
            self.paragraphs[self._open[-1]] += data


_LIST_ITEM = re.compile(r"\n\s*(?:[-*+]|\d+\.)\s+\S")


def _lists_in_paragraphs(page: str) -> list[str]:
    """Lines of paragraphs that begin as a list item does: Markdown that needed a blank
    line before its list, shown as run-on text (``--strict`` does not see it)."""
    parser = _Paragraphs()
    parser.feed(page)
    return [
        paragraph.strip().replace("\n", " ")[:120]
        for paragraph in parser.paragraphs
        if _LIST_ITEM.search(paragraph)
    ]


def test_the_block_reference_is_the_code_s_declarations() -> None:
    """``docs/guide/blocks.md`` is written from the blocks' declarations: a block or field
    added or changed without writing the page again fails here."""
    from streaming.workflows.blocks.reference import markdown

    page = (ROOT / "docs" / "guide" / "blocks.md").read_text()
    assert page == markdown(), (
        "docs/guide/blocks.md differs from the declarations: "
        "python -m streaming.workflows.blocks.reference > docs/guide/blocks.md"
    )


def test_the_settings_page_is_the_code_s_declarations() -> None:
    """``docs/guide/settings.md`` is written from ``streaming/settings/`` (every field's
    variable, default and docstring); a setting added, changed or left undocumented there
    without writing the page again fails here."""
    from streaming.config import CONCERNS, Settings
    from streaming.settings.reference import docstrings, markdown

    said = docstrings(Settings)
    undocumented = [name for name in Settings.model_fields if not said.get(name)]
    assert not undocumented, f"declare a docstring under each setting: {undocumented}"
    assert set(Settings.model_fields) == {n for c in CONCERNS for n in c.model_fields}
    page = (ROOT / "docs" / "guide" / "settings.md").read_text()
    assert page == markdown(), (
        "docs/guide/settings.md differs from the declarations: "
        "python -m streaming.settings.reference > docs/guide/settings.md"
    )
