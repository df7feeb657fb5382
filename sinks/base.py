"""What a pipeline sink is: ``ResultSink``, opened from its settings (``SinkSettings``, one
field of a pipeline's ``sink_configuration``), written every result (``Written``) from a
worker thread, told of sources that come and go, closed once, and asked for its stats.

A pipeline's fan-out (``streaming/pipelines/sinks.py``) opens every sink whose settings the
request set and iterates them; it knows no sink by name. A new pipeline sink is its module
here (its settings and its sink) and one field in ``SinkConfiguration``
(``streaming/pipelines/models.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator

from .pinning import Pin

__all__ = ["NamedSinkSettings", "ResultSink", "SinkContext", "SinkSettings", "Written"]

_SINK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class Written(Protocol):
    """One result of a pipeline, as its sinks get it."""

    @property
    def source_id(self) -> int: ...

    def record(self) -> dict[str, Any]:
        """Its metadata and outputs as JSON values, no images (made once, for every sink)."""

    def image(self, output: str | None) -> np.ndarray:
        """The image output named (None: the first one), else the source's frame (BGR)."""


@dataclass(frozen=True)
class SinkContext:
    """What a sink is opened with besides its settings."""

    pipeline: str
    """The pipeline's short id (for logs)."""
    directory: Path
    """The server's sink directory (``VISIONSTREAM_SINK_DIR``): a sink's files go under it."""
    started: str
    """When the pipeline started (``%Y%m%d-%H%M%S``): in file names, so a restarted
    pipeline never overwrites what it wrote before."""
    pin: Pin | None = None
    """Where a sink connects for the caller (a webhook): the checked address of a host."""


class ResultSink(Protocol):
    """A pipeline sink. Every method but ``stats`` runs on a worker thread, one at a time
    (the fan-out holds a lock): a method may block on its disk or its queue."""

    name: str
    """Its field in ``sink_configuration``; the status reports its stats under it."""

    def add_source(self, source_id: int) -> None:
        """A source of the pipeline (at start, or added while it runs)."""

    def remove_source(self, source_id: int) -> None:
        """The source left the pipeline: what the sink holds of it is finished."""

    def write(self, result: Written) -> None: ...

    def close(self) -> None:
        """Flush and release everything; called once."""

    def stats(self) -> dict[str, Any]:
        """What it wrote (JSON values); empty: nothing to say."""


class SinkSettings(BaseModel):
    """The settings of one pipeline sink, as a request gives them (unknown fields ignored,
    as the reference's models do); ``open`` makes the sink."""

    model_config = ConfigDict(extra="ignore")

    def open(self, context: SinkContext) -> ResultSink:
        raise NotImplementedError

    def destinations(self) -> list[tuple[str, str]]:
        """Every URL this sink will connect to, each with the name of its field: the server
        checks them all against the egress policy before the pipeline starts, whatever the
        sink (a sink that only writes files has none)."""
        return []


class NamedSinkSettings(SinkSettings):
    """A sink that writes files named by the request, under the sink directory."""

    name: str
    """File name under the server's sink directory, without extension."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _SINK_NAME.match(value):
            raise ValueError("a sink name is letters, digits, '.', '_' and '-' (no paths)")
        return value
