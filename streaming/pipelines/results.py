"""Where a pipeline's results go: the memory buffer ``consume`` reads (with its long poll),
the watchers (WebRTC sessions showing the pipeline) and the sinks its request set."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sinks import MemorySink
from sinks.pinning import Pin

from ..watching import Ended, PipelineResult, Watcher
from ..workflows.blocks.base import WorkflowImage
from ..workflows.serialization import serialize_value
from .models import SinkConfiguration
from .sinks import SinkFanOut

__all__ = ["PipelineResults"]


@dataclass(eq=False)
class _Watching:
    results: Watcher
    ended: Ended | None


class PipelineResults:
    """One pipeline's results, from its sources' tasks (on the loop) to whoever takes them."""

    def __init__(
        self,
        pipeline: str,
        config: SinkConfiguration,
        source_ids: list[int],
        sink_dir: Path,
        executor: Executor,
        jpeg_quality: int,
        pin: Pin | None = None,
    ) -> None:
        """``pin``: where its sinks connect for the caller (a webhook's checked address)."""
        self._executor = executor
        self._jpeg_quality = jpeg_quality
        self.memory: MemorySink[PipelineResult] = MemorySink(config.results_buffer_size)
        self._changed = asyncio.Event()
        self._stopped = False
        self._watchers: list[_Watching] = []
        self._sinks = SinkFanOut(
            pipeline,
            config,
            source_ids,
            sink_dir,
            lambda result: {**result.metadata(), "outputs": self.serialize(result, images=False)},
            pin,
        )

    async def dispatch(self, result: PipelineResult) -> None:
        """To the memory buffer, every watcher, then the sinks (on a worker thread)."""
        self.memory.write(result)
        self._changed.set()
        for watching in list(self._watchers):
            self._sinks.guarded("watcher", watching.results, result)
        if self._sinks.any:
            await asyncio.get_running_loop().run_in_executor(
                self._executor, self._sinks.write, result
            )

    def tell_ended(self, source_id: int, why: str) -> None:
        """Every watcher hears that a source will give no more results."""
        for watching in list(self._watchers):
            if watching.ended is not None:
                self._sinks.guarded("watcher", watching.ended, source_id, why)

    async def next(self, wait_s: float) -> PipelineResult | None:
        """The oldest buffered result; waits up to ``wait_s`` for one (our long poll)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while (result := self.memory.pop()) is None and not self._stopped:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return None
        return result

    def serialize(
        self, result: PipelineResult, excluded: list[str] | None = None, images: bool = True
    ) -> dict[str, Any]:
        """Top-level outputs as JSON values (images as base64 JPEG unless ``images`` is off)."""
        skip = set(excluded or ())
        metadata = {"frame_number": result.frame_id, "source_id": result.source_id}
        return {
            name: serialize_value(value, self._jpeg_quality, metadata)
            for name, value in result.outputs.items()
            if name not in skip and (images or not isinstance(value, WorkflowImage))
        }

    def watch(self, watcher: Watcher, ended: Ended | None = None) -> Callable[[], None]:
        """Receive every result from now on, and (``ended``) each source that stops;
        returns the function that stops it."""
        watching = _Watching(watcher, ended)
        self._watchers.append(watching)

        def stop() -> None:
            if watching in self._watchers:
                self._watchers.remove(watching)

        return stop

    async def add_source(self, source_id: int) -> None:
        await asyncio.to_thread(self._sinks.add_source, source_id)

    async def remove_source(self, source_id: int) -> None:
        """What the sinks hold of the source finished."""
        await asyncio.to_thread(self._sinks.remove_source, source_id)

    def stop_waiting(self) -> None:
        """The pipeline is ending: long polls answer now."""
        self._stopped = True
        self._changed.set()

    async def close(self) -> None:
        """The sinks flushed and closed, the watchers dropped, the buffer emptied."""
        self.stop_waiting()
        await asyncio.to_thread(self._sinks.close)
        self._watchers.clear()
        self.memory.close()

    def stats(self) -> dict[str, Any]:
        memory = {"buffered": len(self.memory), "dropped": self.memory.dropped}
        return {"memory": memory, **self._sinks.stats()}
