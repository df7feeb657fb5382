"""One JSON object per line, flushed per line so a tail -f or a crash loses nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .base import NamedSinkSettings, SinkContext, Written

__all__ = ["JsonLinesWriter", "JsonlSink", "JsonlSinkConfiguration"]


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


class JsonlSinkConfiguration(NamedSinkSettings):
    """Ours: one JSON line per result, appended to a file in the sink directory
    (``<name>.jsonl``)."""

    def open(self, context: SinkContext) -> JsonlSink:
        return JsonlSink(JsonLinesWriter(context.directory / f"{self.name}.jsonl", append=True))


class JsonlSink:
    """A pipeline's results, one line each (``ResultSink``)."""

    name = "jsonl"

    def __init__(self, writer: JsonLinesWriter) -> None:
        self._writer = writer

    def add_source(self, source_id: int) -> None:
        pass  # one file for every source: each line names its own

    def remove_source(self, source_id: int) -> None:
        pass

    def write(self, result: Written) -> None:
        self._writer.write(result.record())

    def close(self) -> None:
        self._writer.close()

    def stats(self) -> dict[str, Any]:
        return {"lines": self._writer.lines, "file": self._writer.path.name}
