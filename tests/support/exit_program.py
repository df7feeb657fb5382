"""A user's program that ends while its session streams; tests run it as a subprocess.

    python -m tests.support.exit_program URL MODE ENDING SOURCE [CLIP]

MODE: how the program consumes (run | video | results | callbacks | thread | astream, the
session never closed | astream_with, ``async with``).
ENDING: how it ends once the first frame or result is back:
  raise   an exception escapes the program, the session never closed by the program;
  return  the program returns without closing the session;
  sigint  it keeps consuming; the test sends SIGINT (Ctrl-C).
SOURCE: manual | webcam (an injected capture) | file (CLIP, uploaded).

It prints ``ENDING`` just before it raises or returns, and ``STREAMING`` when it is waiting
for the test's signal, so the test measures from that moment to the process's exit.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from typing import Any

import numpy as np

from streaming import Client, ManualSource, StreamConfig, VideoFileSource, WebcamSource
from streaming.protocol.workflows import object_detection
from streaming.rtc.ice import restrict_host_addresses

CONFIG = StreamConfig(stream_output=["annotated"], data_output=["predictions"])


class _Capture:
    """OpenCV's VideoCapture interface over generated frames, at about 30 fps."""

    def __init__(self, _device: int) -> None:
        self._released = threading.Event()

    def isOpened(self) -> bool:
        return True

    def read(self) -> tuple[bool, np.ndarray | None]:
        if self._released.wait(1 / 30):
            return False, None
        return True, np.full((240, 320, 3), 90, np.uint8)

    def get(self, _prop: int) -> float:
        return 30.0

    def set(self, _prop: int, _value: float) -> bool:
        return True

    def release(self) -> None:
        self._released.set()


def make_source(kind: str, clip: str | None) -> Any:
    if kind == "manual":
        source = ManualSource()

        def feed() -> None:  # a producer that never stops by itself, as a camera loop
            image = np.full((240, 320, 3), 60, np.uint8)
            stop = threading.Event()
            while not stop.wait(1 / 30):
                try:
                    source.send(image)
                except RuntimeError:  # the session closed
                    return

        threading.Thread(target=feed, daemon=True).start()
        return source
    if kind == "webcam":
        return WebcamSource(0, capture_factory=_Capture)
    assert clip is not None
    return VideoFileSource(clip)


def end(ending: str) -> None:
    """Raises or returns (the ``sigint`` ending never gets here: each mode keeps consuming)."""
    print("ENDING", flush=True)
    if ending == "raise":
        raise RuntimeError("the program failed while streaming")


def blocking(url: str, mode: str, ending: str, source: Any) -> None:
    session = Client(url).webrtc.stream(source, workflow=object_detection(), config=CONFIG)
    first = threading.Event()
    if mode == "run":

        @session.on_frame
        def on_frame(frame: np.ndarray, metadata: Any) -> None:
            if ending == "sigint" and not first.is_set():
                print("STREAMING", flush=True)
            first.set()

        if ending == "sigint":
            session.run()  # until Ctrl-C
            return
        threading.Thread(target=session.run, daemon=True).start()
        first.wait()
        end(ending)
    elif mode in ("video", "results"):
        iterate = session.video if mode == "video" else session.results
        for _ in iterate():
            if ending != "sigint":
                end(ending)
                return
            print("STREAMING", flush=True)  # then keeps iterating until Ctrl-C
    elif mode == "callbacks":

        @session.on_data("predictions")
        def on_predictions(predictions: Any) -> None:
            first.set()

        session.start()
        first.wait()
        if ending == "sigint":
            print("STREAMING", flush=True)
            session.wait()
            return
        end(ending)
    elif mode == "thread":
        # The natural first program: a consumer thread, and frames sent at once.
        def consume() -> None:
            for _ in session.video():
                first.set()

        threading.Thread(target=consume, daemon=True).start()
        first.wait()
        end(ending)


async def asynchronous(url: str, mode: str, ending: str, source: Any) -> None:
    session = Client(url).webrtc.astream(source, workflow=object_detection(), config=CONFIG)
    if mode == "astream_with":
        async with session:
            await consume(session, ending)
    else:
        await session.start()  # never closed by the program
        await consume(session, ending)


async def consume(session: Any, ending: str) -> None:
    async for _ in session.video():
        if ending == "sigint":
            print("STREAMING", flush=True)
            continue
        end(ending)
        return


def main() -> None:
    # As the test process does (conftest.py): aioice skips loopback by itself, and the
    # suite's namespace has nothing else.
    restrict_host_addresses(["127.0.0.1"])
    # Ctrl-C as at a terminal, even where the suite was started as a background job (a shell
    # without job control starts those with SIGINT ignored, and children inherit that).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    url, mode, ending, kind = sys.argv[1:5]
    source = make_source(kind, sys.argv[5] if len(sys.argv) > 5 else None)
    if mode.startswith("astream"):
        asyncio.run(asynchronous(url, mode, ending, source))
    else:
        blocking(url, mode, ending, source)


if __name__ == "__main__":
    main()
