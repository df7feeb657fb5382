"""What a watcher of a pipeline sees: its results, the end of its sources, and the pipeline
as a WebRTC session shows it (``WatchedPipeline``: here or in a Ray actor).

Its own module so that sessions (``peer/``) can show a pipeline without importing
``pipelines/``, and a pipeline can have watchers without knowing what a session is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from sources import LiveFeed, SourceFrame

from .workflows.blocks.base import WorkflowImage
from .workflows.runner import WorkflowOutputs

__all__ = ["Ended", "PipelineResult", "WatchedPipeline", "Watcher", "image_in"]


def image_in(value: Any) -> np.ndarray | None:
    """The picture an output shows: an image, or the last image of an object of outputs
    (as the reference picks it); None when it holds none."""
    if isinstance(value, WorkflowImage):
        return value.numpy
    if isinstance(value, dict):
        found = None
        for item in value.values():  # the last image wins, as in the reference
            if isinstance(item, WorkflowImage):
                found = item.numpy
        return found
    return None


@dataclass
class PipelineResult:
    """One processed frame, as the sinks and watchers get it."""

    source_id: int
    frame_id: int
    frame_timestamp: datetime
    frame: SourceFrame
    outputs: dict[str, Any]

    def metadata(self) -> dict[str, Any]:
        return {
            "frame_timestamp": self.frame_timestamp.isoformat(),
            "frame_id": self.frame_id,
            "source_id": self.source_id,
        }


Watcher = Callable[[PipelineResult], None]
"""Called on the event loop with every result; must not block."""

Ended = Callable[[int | None, str], None]
"""Called on the event loop when a source will give no more results: its id (None: every
source of the pipeline) and why, in words; must not block."""


class WatchedPipeline(Protocol):
    """A pipeline as a WebRTC session shows it: here (``Pipeline``) or in a Ray actor."""

    pipeline_id: str

    @property
    def outputs(self) -> WorkflowOutputs:
        """What the session selects its outputs from; the pipeline runs the workflow."""

    @property
    def source_ids(self) -> list[int]: ...

    def camera_feed(self, source_id: int) -> LiveFeed | None:
        """A camera source's connection, whose packets a restream may copy (None: not a
        camera, or not in this process)."""

    def watch(self, watcher: Watcher, ended: Ended | None = None) -> Callable[[], None]:
        """``watcher`` gets results from now on until the returned function is called;
        ``ended`` hears of each source that stops (removed, its file ended, the pipeline
        terminated), so a viewer need not wait on frames that will never come."""
