"""One JSON object per line, flushed per line so a tail -f or a crash loses nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["JsonLinesWriter"]


class JsonLinesWriter:
    """Writes one JSON object per line, flushed per line."""

    def __init__(self, path: str | Path, append: bool = False) -> None:
        """``append``: keep what the file already holds (a long-running monitoring log)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a" if append else "w", encoding="utf-8")
        self.lines = 0

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
        self._file.flush()
        self.lines += 1

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> JsonLinesWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
