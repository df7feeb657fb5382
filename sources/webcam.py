"""A camera read by OpenCV on its own thread, so a slow consumer never makes it lag."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import cv2

from .base import RTP_CLOCK, FrameSource, SourceError, SourceFrame

__all__ = ["CameraSource", "CaptureFactory", "is_device"]

_DEVICE_PATH = re.compile(r"^/dev/video[0-9]{1,3}$")


def is_device(reference: str) -> bool:
    """A local camera: an index as text (``"0"``) or a V4L2 device path (``/dev/video0``)."""
    return (reference.isascii() and reference.isdigit() and len(reference) <= 3) or bool(
        _DEVICE_PATH.match(reference)
    )


CaptureFactory = Callable[[int | str], Any]
"""Returns an object with OpenCV's ``VideoCapture`` interface (isOpened/read/get/set/release)."""


class CameraSource(FrameSource):
    """Latest frame wins: the capture thread keeps reading so the driver's buffer stays empty.

    ``device_id``: an index (0) or a device path (``/dev/video0``). ``capture_factory``
    defaults to ``cv2.VideoCapture``; tests inject a capture object there.
    """

    def __init__(
        self,
        device_id: int | str = 0,
        resolution: tuple[int, int] | None = None,
        capture_factory: CaptureFactory | None = None,
    ) -> None:
        self.device_id = device_id
        factory = capture_factory or cv2.VideoCapture
        self._capture = factory(device_id)
        if not self._capture.isOpened():
            self._capture.release()
            raise SourceError(
                f"cannot open camera {device_id}: no such device, or it is busy or not readable "
                "by this user"
            )
        if resolution is not None:
            self._capture.set(cv2.CAP_PROP_FRAME_WIDTH, resolution[0])
            self._capture.set(cv2.CAP_PROP_FRAME_HEIGHT, resolution[1])
        fps = self._capture.get(cv2.CAP_PROP_FPS)
        self.fps = float(fps) if fps and fps > 0 else None
        self.dropped = 0
        self._latest: SourceFrame | None = None
        self._changed = threading.Condition()
        self._closed = False
        self._ended = False
        self._thread = threading.Thread(
            target=self._capture_loop, name=f"camera-{device_id}", daemon=True
        )
        self._thread.start()

    def _capture_loop(self) -> None:
        origin: float | None = None
        index = 0
        try:
            while not self._closed:
                ok, image = self._capture.read()
                now = time.monotonic()
                if not ok or image is None:
                    if not self._closed:
                        self.error = f"camera {self.device_id} stopped delivering frames"
                    break
                origin = now if origin is None else origin
                frame = SourceFrame(image, round((now - origin) * 90000), RTP_CLOCK, index)
                index += 1
                with self._changed:
                    if self._latest is not None:
                        self.dropped += 1
                    self._latest = frame
                    self._changed.notify_all()
        finally:
            self._capture.release()
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def read(self) -> SourceFrame | None:
        with self._changed:
            self._changed.wait_for(lambda: self._latest is not None or self._ended or self._closed)
            if self._closed:
                return None
            frame, self._latest = self._latest, None
            return frame

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._thread is not threading.current_thread():
            # read() on a real camera returns within a frame interval; the capture is
            # released by the thread that uses it.
            self._thread.join(timeout=5)
