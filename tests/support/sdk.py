"""inference-sdk's ManualSource, used the thread-safe way, for tests and benchmarks."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import numpy as np
from inference_sdk import InferenceHTTPClient
from inference_sdk.webrtc import ManualSource, StreamConfig


class LoopManualSource(ManualSource):
    """A ManualSource that knows when its connection is up and sends on the SDK's own loop.

    inference-sdk 1.8.3's ``ManualSource.send`` puts the frame on an ``asyncio.Queue`` from
    the calling thread; the track waiting on that queue then wakes only when the SDK's loop
    wakes for something else. Its public ``configure_peer_connection`` hook runs on that loop,
    which hands us the loop to call ``send`` on. Frames sent before the connection is up sit
    in the SDK's 10-frame queue, so a live feed should start at ``connected``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.connected = threading.Event()
        self.offer_ready_at: float | None = None  # perf_counter when ICE gathering completed
        self.loop: asyncio.AbstractEventLoop | None = None

    async def configure_peer_connection(self, pc) -> None:
        await super().configure_peer_connection(pc)
        self.loop = asyncio.get_running_loop()

        @pc.on("connectionstatechange")
        def _state() -> None:
            if pc.connectionState == "connected":
                self.connected.set()

        @pc.on("icegatheringstatechange")
        def _gathered() -> None:
            # The SDK posts its offer as soon as gathering completes: the POST time.
            if pc.iceGatheringState == "complete":
                self.offer_ready_at = time.perf_counter()

    def send_on_loop(self, image: np.ndarray) -> None:
        """``send``, run on the SDK's loop (falls back to this thread before it exists)."""
        if self.loop is None:
            self.send(image)
        else:
            self.loop.call_soon_threadsafe(self.send, image)


class SdkSession:
    """The published SDK's program, fed ``fps`` gray frames a second until ``close``; counts
    the frames and predictions it gets back."""

    def __init__(self, url: str, workflow: dict, fps: float = 15, wait_s: float = 60) -> None:
        self._fps, self._wait_s = fps, wait_s
        self.source = LoopManualSource()
        client = InferenceHTTPClient(api_url=url, api_key=None)
        self.session = client.webrtc.stream(
            source=self.source,
            workflow=workflow,
            config=StreamConfig(stream_output=["annotated"], data_output=["predictions"]),
        )
        self.changed = threading.Condition()
        self.frames = self.predictions = 0
        self.ended = threading.Event()
        """The SDK's video iterator ended: the peer connection closed or failed."""
        self._stop = threading.Event()
        self.session.on_data("predictions")(self._on_predictions)
        for work in (self._consume, self._feed):
            threading.Thread(target=work, daemon=True).start()

    def _on_predictions(self, data: Any, metadata: Any) -> None:
        with self.changed:
            self.predictions += 1
            self.changed.notify_all()

    def _consume(self) -> None:
        for _frame, _metadata in self.session.video():
            with self.changed:
                self.frames += 1
                self.changed.notify_all()
            if self._stop.is_set():
                return
        self.ended.set()

    def _feed(self) -> None:
        image = np.full((480, 640, 3), 90, np.uint8)
        if not self.source.connected.wait(self._wait_s):
            return
        while not self._stop.wait(1 / self._fps):
            self.source.send_on_loop(image)

    def wait_streaming(self, count: int = 10) -> None:
        with self.changed:
            streaming = self.changed.wait_for(
                lambda: self.frames >= count and self.predictions >= count, self._wait_s
            )
        assert streaming, f"{self.frames} frames, {self.predictions} predictions back"

    def close(self) -> None:
        self._stop.set()
        self.session.close()
