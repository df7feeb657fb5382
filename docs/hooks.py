"""MkDocs hooks: the repository's README as the guide's first page, "Start here", written
once (in the README) and shown in both; its links into ``docs/guide/`` become the site's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parents[1] / "README.md"


def on_files(files: Files, config: Any) -> Files:
    text = README.read_text().replace("](docs/guide/", "](")
    files.append(File.generated(config, "start.md", content=text))
    return files
