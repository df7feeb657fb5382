"""inference-sdk's ManualSource, used the thread-safe way, for tests and benchmarks."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
from inference_sdk.webrtc import ManualSource


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
