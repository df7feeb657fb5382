"""The README and the guide stay readable and whole: the README fits its budget, the guide builds
with ``mkdocs build --strict`` (a broken link, anchor or page left out of the nav fails), and
every link the README makes into the repository lands on a file and a heading that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

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
