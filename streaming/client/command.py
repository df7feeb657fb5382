"""``visionstream stream``: the client from the shell.

Frames go to the display and the recording from ``video()`` on the main thread; every
result message becomes one JSON line from the data handler. A status line shows progress
(frames done / total for files), fps, latency and drops; Ctrl-C closes the session cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sinks import DisplayWindow, JsonLinesWriter, VideoRecorder
from sources import FileSource, SourceError, SyntheticSource, decode_stamp

from ..config import Settings
from ..peer.ice import restrict_host_addresses
from ..protocol.messages import VideoMetadata
from ..workflows.library import object_detection
from .client import Client
from .config import StreamConfig
from .errors import InvalidParameterError, SessionStartError
from .sources import (
    FrameSourceStream,
    MJPEGSource,
    RTSPSource,
    StreamSource,
    VideoFileSource,
    WebcamSource,
)

__all__ = ["add_arguments", "run"]

_SYNTHETIC = re.compile(r"^synthetic(?::(\d+)x(\d+)(?:@(\d+(?:\.\d+)?))?)?$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        required=True,
        help="webcam[:N] | PATH | rtsp://... | http(s)://... (MJPEG) | synthetic[:WxH@FPS]",
    )
    parser.add_argument(
        "--workflow",
        help="workflow id (with --workspace) or a specification JSON file "
        "(default: built-in object detection)",
    )
    parser.add_argument("--workspace", help="workspace of a workflow id")
    parser.add_argument("--api-url", default="http://127.0.0.1:9001")
    parser.add_argument("--api-key", help="or set VISIONSTREAM_API_KEY")
    parser.add_argument("--display", action="store_true", help="show frames in a window")
    parser.add_argument("--record", type=Path, metavar="OUT.mp4", help="record returned frames")
    parser.add_argument("--jsonl", type=Path, metavar="OUT.jsonl", help="one line per result")
    parser.add_argument(
        "--realtime",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="drop frames to keep up (default: on for live sources, off for files)",
    )
    parser.add_argument("--stream-output", help="workflow output to render (default: auto)")
    parser.add_argument(
        "--data-output", nargs="*", default=["*"], help="workflow outputs to receive (default: all)"
    )
    parser.add_argument("--frames", type=int, help="synthetic: how many frames (default endless)")
    parser.add_argument("--connect-timeout", type=float, default=30.0)


class _Progress:
    """The status line on stderr: done[/total], fps, latency, dropped. Thread-safe."""

    def __init__(self, total: int | None, stream: Any = sys.stderr) -> None:
        self.total = total
        self.frames_sent: Callable[[], int | None] = lambda: None
        self.done = 0
        self.latency_ms: float | None = None
        self.latency_kind = ""
        self._stream = stream
        self._started = time.monotonic()
        self._printed = 0.0
        self._lock = threading.Lock()
        self._upload = ""

    def upload(self, done: int, total: int) -> None:
        with self._lock:
            self._upload = f"upload {_bar(done, total)} {100 * done // total}% | "
            self._print(force=done == total)

    def result(self, metadata: VideoMetadata) -> None:
        with self._lock:
            self.done += 1
            if self.latency_kind != "end-to-end" and metadata.processing_ms is not None:
                self.latency_ms = metadata.processing_ms + (metadata.queue_wait_ms or 0.0)
                self.latency_kind = "server"
            self._print()

    def frame(self, age_ms: float | None) -> None:
        if age_ms is not None:
            with self._lock:
                self.latency_ms, self.latency_kind = age_ms, "end-to-end"

    def line(self) -> str:
        elapsed = max(1e-6, time.monotonic() - self._started)
        done = (
            f"{_bar(self.done, self.total)} {self.done}/{self.total}"
            if self.total
            else str(self.done)
        )
        parts = [f"{self._upload}frames {done}", f"{self.done / elapsed:.1f} fps"]
        if self.latency_ms is not None:
            parts.append(f"latency {self.latency_ms:.0f} ms ({self.latency_kind})")
        if (sent := self.frames_sent()) is not None:
            parts.append(f"dropped {max(0, sent - self.done)}")
        return " | ".join(parts)

    def _print(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._printed >= 0.5:
            self._printed = now
            self._stream.write("\r" + self.line() + "\033[K")
            self._stream.flush()

    def finish(self) -> None:
        with self._lock:
            self._stream.write("\r" + self.line() + "\033[K\n")
            self._stream.flush()


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = min(width, width * done // max(1, total))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def _source(args: argparse.Namespace, progress: _Progress) -> tuple[StreamSource, bool]:
    """The stream source for ``--source`` and whether it is live."""
    spec = args.source
    if spec == "webcam" or spec.startswith("webcam:"):
        device = spec.partition(":")[2] or "0"
        if not device.isdigit():
            raise InvalidParameterError(f"webcam device must be a number: {spec!r}")
        return WebcamSource(int(device)), True
    if match := _SYNTHETIC.match(spec):
        width, height, fps = match.groups()
        size = (int(width), int(height)) if width else (640, 480)
        rate = float(fps) if fps else 30.0
        frames = args.frames
        return FrameSourceStream(lambda: SyntheticSource(*size, fps=rate, frames=frames)), True
    if spec.startswith(("rtsp://", "rtsps://")):
        return RTSPSource(spec), True
    if spec.startswith(("http://", "https://")):
        return MJPEGSource(spec), True
    try:
        with FileSource(spec) as probe:
            progress.total = probe.frame_count
    except SourceError as exc:
        raise InvalidParameterError(str(exc)) from None
    return VideoFileSource(
        spec,
        progress.upload,
        # Rendered frames come back inside the messages (every one, in order) when the output
        # is named; otherwise on a video track, so the server can pick the image output.
        use_datachannel_frames=args.stream_output is not None,
        realtime_processing=bool(args.realtime),
    ), False


def _workflow(args: argparse.Namespace) -> tuple[str | dict[str, Any], str | None]:
    if args.workflow is None:
        return object_detection(), None
    path = Path(args.workflow)
    if path.suffix == ".json" or path.is_file():
        try:
            spec = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise InvalidParameterError(f"cannot read workflow {path}: {exc}") from None
        if isinstance(spec, dict) and "specification" in spec and "steps" not in spec:
            spec = spec["specification"]  # the export format wraps the specification
        if not isinstance(spec, dict):
            raise InvalidParameterError(f"workflow {path} is not a JSON object")
        return spec, None
    return args.workflow, args.workspace


def run(args: argparse.Namespace) -> int:
    settings = Settings()
    host = urlsplit(args.api_url).hostname or ""
    if settings.ice_host_addresses:
        restrict_host_addresses(settings.ice_host_addresses)
    elif host in ("127.0.0.1", "localhost", "::1"):
        # aioice never offers loopback addresses; for a server on this machine they are the
        # right ones (and the only ones on a loopback-only host). One session per process
        # here, so the process-wide switch is ours to set.
        restrict_host_addresses(["::1" if host == "::1" else "127.0.0.1"])
    progress = _Progress(None)
    try:
        source, live = _source(args, progress)
        workflow, workspace = _workflow(args)
    except (InvalidParameterError, ValueError) as exc:
        print(f"visionstream stream: {exc}", file=sys.stderr)
        return 2
    # Local sources have a track once the session starts: dropped = frames sent - results.
    progress.frames_sent = lambda: getattr(getattr(source, "track", None), "frames_sent", None)
    # Only synthetic frames carry a stamp; decoding one elsewhere is wasted per-frame work.
    stamped = _SYNTHETIC.match(args.source) is not None
    realtime = live if args.realtime is None else args.realtime
    wants_video = args.display or args.record is not None
    config = StreamConfig(
        stream_output=([args.stream_output] if args.stream_output else None) if wants_video else [],
        data_output=list(args.data_output),
        realtime_processing=realtime,
    )
    client = Client(
        args.api_url,
        args.api_key or os.environ.get("VISIONSTREAM_API_KEY"),
        connect_timeout=args.connect_timeout,
    )
    session = client.webrtc.stream(source, workflow=workflow, workspace=workspace, config=config)
    jsonl = JsonLinesWriter(args.jsonl) if args.jsonl else None

    @session.on_data()
    def _record_result(data: Any, metadata: VideoMetadata) -> None:
        if jsonl is not None:
            jsonl.write(
                {
                    "frame_id": metadata.frame_id,
                    "pts": metadata.pts,
                    "time_base": metadata.time_base,
                    "received_at": metadata.received_at.isoformat(),
                    "errors": metadata.errors,
                    "processing_ms": metadata.processing_ms,
                    "data": data,
                }
            )
        progress.result(metadata)

    recorder = VideoRecorder(args.record) if args.record else None
    window = DisplayWindow() if args.display else None
    code = 0
    try:
        with session:
            if wants_video:
                for frame, metadata in session.video():
                    stamp = decode_stamp(frame) if stamped else None
                    progress.frame(stamp.age_ms() if stamp else None)
                    if recorder is not None:
                        seconds = (metadata.pts or 0) * (metadata.time_base or 0) or None
                        recorder.write(frame, seconds)
                    if window is not None and not window.show(frame):
                        break
            else:
                session.wait()
    except SessionStartError as exc:
        print(f"\nvisionstream stream: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    finally:
        for sink in (recorder, jsonl, window):
            if sink is not None:
                sink.close()
    progress.finish()
    if session.termination_reason:
        print(f"server ended the stream: {session.termination_reason}", file=sys.stderr)
    return code
