"""The code examples of the README and the guide, read from their Markdown as a reader sees them.

Each fenced block is one example. A comment on the line before its fence says how the suite
treats it: ``<!-- example: not run: WHY -->`` (the reason is required: a webcam, Docker, a
cluster), ``<!-- example: run -->`` (a shell block run as written), or nothing (a Python block is
run, a JSON block parsed; a shell block without either comment is an error, so none is
forgotten). Examples are written for a server on ``127.0.0.1:9001`` and cameras on
``127.0.0.1:8554``; ``localised`` points them at the test's own server and cameras."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
SERVER = "127.0.0.1:9001"
CAMERAS = ("rtsp://127.0.0.1:8554/cam2", "rtsp://127.0.0.1:8554/cam")  # the longer first
_FENCE = re.compile(
    r"(?:^<!-- example: (?P<mark>.*?) -->\n)?^```(?P<lang>\w*)\n(?P<code>.*?)^```$", re.S | re.M
)


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    lang: str
    code: str
    mark: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        if self.mark is not None and self.mark.startswith("not run"):
            return False
        return self.lang == "python" or self.mark == "run"

    def localised(self, server_url: str, cameras: list[str]) -> str:
        """The code pointed at the test's server (``http://127.0.0.1:PORT``) and cameras."""
        code = self.code.replace(f"http://{SERVER}", server_url)
        code = code.replace(f"localhost:{SERVER.split(':')[1]}", server_url.split("//")[1])
        for written, real in zip(CAMERAS, reversed(cameras), strict=True):
            code = code.replace(written, real)
        return code

    def json_value(self) -> object:
        """A JSON block's value; a fragment (``"key": ...``, as in a larger body) is read as the
        members of an object."""
        text = self.code
        return json.loads("{" + text + "}" if text.lstrip().startswith('"') else text)


def examples() -> list[Example]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start("lang")) + 1
            found.append(
                Example(page, line, match["lang"], match["code"], match["mark"])
            )  # fmt: skip
    return found
