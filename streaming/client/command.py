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
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import cv2

from sinks import DisplayWindow, JsonLinesWriter, VideoRecorder
from sources import FileSource, SourceError, SyntheticSource, decode_stamp

from ..config import ClientSettings
from ..protocol.messages import VideoMetadata
from ..protocol.workflows import object_detection
from ..rtc.ice import restrict_host_addresses
from .blocking import WebRTCSession, pending_signal
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

__all__ = ["run"]

_OPENCV_LOG_FATAL = 1  # cv2.utils.logging.LOG_LEVEL_FATAL, not exposed by every build

_SYNTHETIC = re.compile(r"^synthetic(?::(\d+)x(\d+)(?:@(\d+(?:\.\d+)?))?)?$")


class _Progress:
    """The status line on stderr: done[/total], fps, latency, dropped, and a line counter's
    counts when the results carry them. Thread-safe."""

    def __init__(self, total: int | None, stream: Any = sys.stderr) -> None:
        self.total = total
        self.frames_sent: Callable[[], int | None] = lambda: None
        self.done = 0
        self.latency_ms: float | None = None
        self.latency_kind = ""
        self.queued_ms: float | None = None
        self._seen = ""
        self._stream = stream
        self._started = time.monotonic()
        self._printed = 0.0
        self._lock = threading.Lock()
        self._upload = ""
        self._counts: tuple[Any, Any] | None = None

    def upload(self, done: int, total: int) -> None:
        with self._lock:
            self._upload = f"upload {_bar(done, total)} {100 * done // total}% | "
            self._print(force=done == total)

    def result(self, metadata: VideoMetadata, data: Any = None) -> None:
        with self._lock:
            self.done += 1
            # A line counter's outputs (the people-counting workflow's, say).
            if isinstance(data, dict) and isinstance(data.get("count_in"), int):
                self._counts = (data["count_in"], data.get("count_out"))
            if (seen := _detected(data)) is not None:
                self._seen = seen
            if self.latency_kind != "end-to-end" and metadata.processing_ms is not None:
                # The figures the JSONL has: processing, and apart from it the wait before
                # (an upload outruns the server: its frames queue).
                self.latency_ms = metadata.processing_ms
                self.queued_ms = metadata.queue_wait_ms
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
            # Say which: end to end (a synthetic frame's stamp read back), or only the
            # server's part (queue and processing), in words that cannot be mistaken for it.
            label = "end-to-end" if self.latency_kind == "end-to-end" else "server processing"
            parts.append(f"{label} {_ms(self.latency_ms)}")
            if self.latency_kind == "server" and self.queued_ms:
                parts.append(f"queued {_ms(self.queued_ms)}")
        if (sent := self.frames_sent()) is not None:
            parts.append(f"dropped {max(0, sent - self.done)}")
        if self._counts is not None:
            parts.append(f"in {self._counts[0]} out {self._counts[1]}")
        if self._seen:
            parts.append(self._seen)
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


def _detected(data: Any) -> str | None:
    """What the frame's detections are, by class (``2 person, 1 dog``, most first); None
    when the frame's outputs carry no detections."""
    if not isinstance(data, dict):
        return None
    found: Counter[str] = Counter()
    carried = False
    for value in data.values():
        predictions = value.get("predictions") if isinstance(value, dict) else None
        if isinstance(predictions, list):
            carried = True
            found.update(
                str(p["class"]) for p in predictions if isinstance(p, dict) and "class" in p
            )
    if not carried:
        return None
    return ", ".join(f"{n} {name}" for name, n in found.most_common(4)) or "nothing detected"


def _ms(value: float) -> str:
    return f"{value:.1f} ms" if value < 10 else f"{value:.0f} ms"


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = min(width, width * done // max(1, total))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def _source(args: argparse.Namespace, progress: _Progress) -> tuple[StreamSource, bool]:
    """The stream source for ``--source`` and whether it is live."""
    spec = args.source
    if spec == "webcam" or spec.startswith("webcam:"):
        device = spec.partition(":")[2] or "0"
        if not (device.isascii() and device.isdigit()):
            raise InvalidParameterError(f"webcam device must be a number: {spec!r}")
        # OpenCV's own warnings about a missing device (one per backend it tries) say less
        # than our error does: only its fatal messages stay.
        cv2.setLogLevel(_OPENCV_LOG_FATAL)
        return WebcamSource(int(device)), True
    if match := _SYNTHETIC.match(spec):
        width, height, fps = match.groups()
        size = (int(width), int(height)) if width else (640, 480)
        rate = float(fps) if fps else 30.0
        frames = args.frames
        SyntheticSource(*size, fps=rate, frames=0).close()  # its size checked now: ValueError
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
    workflow, workspace = args.workflow, args.workspace
    if workspace is None:
        # As GET /workflows and the page name them: "workspace/id"; a bare id is ours.
        workspace, _, rest = workflow.rpartition("/")
        workflow, workspace = (rest, workspace) if workspace else (workflow, "local")
    return workflow, workspace


def _api_url(value: str) -> str:
    """``http://`` is assumed when none is given (``127.0.0.1:9001``)."""
    url = value if "://" in value else f"http://{value}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidParameterError(
            f"--api-url must be the server's http(s) URL, like http://127.0.0.1:9001, not {value!r}"
        )
    return url


class _Terminated(Exception):
    """SIGTERM: ends the stream as Ctrl-C does, closing the session on the way out."""


def _interrupt(error_type: type[BaseException]) -> Callable[[int, object], None]:
    """A handler raising ``error_type``, noted first: raised where Python discards
    exceptions (a weakref callback run by the collector), the session's waits raise it."""

    def handler(signum: int, frame: object) -> None:
        error = error_type()
        pending_signal.note(error)
        raise error

    return handler


def _quiet_lost_signals(unraisable: Any) -> None:
    """``sys.unraisablehook``: a signal's exception lost in a finaliser is no error to
    print (its traceback would read as a crash); the next wait raises it again."""
    if isinstance(unraisable.exc_value, (KeyboardInterrupt, _Terminated)):
        return
    sys.__unraisablehook__(unraisable)


def run(args: argparse.Namespace) -> int:
    # Ours to own: the command is the whole process. Ctrl-C and SIGTERM both close cleanly.
    # SIGINT explicitly too: started in the background by a shell (`cmd &`), a process
    # inherits SIGINT ignored and Python then installs no KeyboardInterrupt at all.
    signal.signal(signal.SIGINT, _interrupt(KeyboardInterrupt))
    signal.signal(signal.SIGTERM, _interrupt(_Terminated))
    sys.unraisablehook = _quiet_lost_signals
    try:
        return _run(args)
    except (KeyboardInterrupt, _Terminated):
        pending_signal.take()
        # Before the session existed (opening a camera, probing a file): nothing to close.
        print("\nvisionstream stream: interrupted", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    settings = ClientSettings()
    try:
        args.api_url = _api_url(args.api_url or settings.api_url)
    except InvalidParameterError as exc:
        print(f"visionstream stream: {exc}", file=sys.stderr)
        return 2
    _restrict_ice(args.api_url, settings)
    progress = _Progress(None)
    try:
        source, live = _source(args, progress)
        workflow, workspace = _workflow(args)
    except (InvalidParameterError, ValueError) as exc:
        print(f"visionstream stream: {exc}", file=sys.stderr)
        return 2
    # Local sources have a track once the session starts: dropped = frames sent - results.
    progress.frames_sent = lambda: getattr(getattr(source, "track", None), "frames_sent", None)
    outputs = _Outputs.of(args)
    config = StreamConfig(
        stream_output=(
            ([args.stream_output] if args.stream_output else None) if outputs.wants_video else []
        ),
        data_output=list(args.data_output),
        realtime_processing=live if args.realtime is None else args.realtime,
        turn_server=_turn_server(args),
        ice_transport_policy="relay" if args.relay_only else "all",
        video_codec=args.video_codec,
    )
    client = Client(args.api_url, args.api_key, connect_timeout=args.connect_timeout)
    session = client.webrtc.stream(source, workflow=workflow, workspace=workspace, config=config)

    @session.on_data()
    def _on_result(data: Any, metadata: VideoMetadata) -> None:
        outputs.write_result(data, metadata)
        progress.result(metadata, data)

    # Only synthetic frames carry a stamp; decoding one elsewhere is wasted per-frame work.
    stamped = _SYNTHETIC.match(args.source) is not None
    code, started, stopped_by_user = _stream(session, outputs, progress, stamped)
    if not started:
        return code  # no status line: nothing was streamed
    progress.finish()
    return _exit_code(session, code, stopped_by_user, args.api_url)


def _restrict_ice(api_url: str, settings: ClientSettings) -> None:
    host = urlsplit(api_url).hostname or ""
    if settings.ice_host_addresses:
        restrict_host_addresses(settings.ice_host_addresses)
    elif host in ("127.0.0.1", "localhost", "::1"):
        # aioice never offers loopback addresses; for a server on this machine they are the
        # right ones (and the only ones on a loopback-only host). One session per process
        # here, so the process-wide switch is ours to set.
        restrict_host_addresses(["::1" if host == "::1" else "127.0.0.1"])


class _Outputs:
    """Where the stream goes on this machine: a JSONL file, a recording, a window."""

    def __init__(
        self,
        jsonl: JsonLinesWriter | None,
        recorder: VideoRecorder | None,
        window: DisplayWindow | None,
    ) -> None:
        self.jsonl, self.recorder, self.window = jsonl, recorder, window

    @classmethod
    def of(cls, args: argparse.Namespace) -> _Outputs:
        return cls(
            JsonLinesWriter(args.jsonl) if args.jsonl else None,
            VideoRecorder(args.record) if args.record else None,
            DisplayWindow() if args.display else None,
        )

    @property
    def wants_video(self) -> bool:
        return self.recorder is not None or self.window is not None

    def write_result(self, data: Any, metadata: VideoMetadata) -> None:
        if self.jsonl is not None:
            self.jsonl.write(
                {
                    "frame_id": metadata.frame_id,
                    "pts": metadata.pts,
                    "time_base": metadata.time_base,
                    "received_at": metadata.received_at.isoformat(),
                    "errors": metadata.errors,
                    "processing_ms": metadata.processing_ms,
                    "queue_wait_ms": metadata.queue_wait_ms,
                    "data": data,
                }
            )

    def show(self, frame: Any, metadata: VideoMetadata) -> bool:
        """Record and show one returned frame; False when the window asks to stop."""
        if self.recorder is not None:
            seconds = (metadata.pts or 0) * (metadata.time_base or 0) or None
            self.recorder.write(frame, seconds)
        return self.window is None or self.window.show(frame)

    def close(self) -> None:
        for sink in (self.recorder, self.jsonl, self.window):
            if sink is not None:
                sink.close()


def _stream(
    session: WebRTCSession, outputs: _Outputs, progress: _Progress, stamped: bool
) -> tuple[int, bool, bool]:
    """Run the session to its end: (exit code so far, whether it started, whether the
    user stopped it from the window)."""
    code = 0
    started = stopped_by_user = False
    try:
        session.start()
        started = True
        with session:
            if outputs.wants_video:
                for frame, metadata in session.video():
                    stamp = decode_stamp(frame) if stamped else None
                    progress.frame(stamp.age_ms() if stamp else None)
                    if not outputs.show(frame, metadata):
                        stopped_by_user = True
                        break
            else:
                session.wait()
    except SessionStartError as exc:
        # An unreachable server's message says how to start one (client/signaling.py).
        print(f"visionstream stream: {exc}{_in_our_terms(exc)}", file=sys.stderr)
        code = 1
    except (KeyboardInterrupt, _Terminated):
        pending_signal.take()  # caught: the clean-up's own waits are not interrupted by it
        code = 130
    finally:
        session.close()
        outputs.close()
    return code, started, stopped_by_user


def _exit_code(session: WebRTCSession, code: int, stopped_by_user: bool, api_url: str) -> int:
    if session.termination_reason:
        print(f"server ended the stream: {session.termination_reason}", file=sys.stderr)
        if session.termination_reason == "server_shutdown" and code == 0:
            code = 1  # cut short: the server went away (it said so)
    if code == 0 and not session.completed and not stopped_by_user:
        print(
            f"visionstream stream: lost the connection to the server at {api_url} "
            "before the stream finished",
            file=sys.stderr,
        )
        code = 1
    return code


def _in_our_terms(exc: SessionStartError) -> str:
    """The server's advice names its API's fields; this command's user types flags."""
    said = exc.server_message or ""
    if exc.status == 401:
        return "\n  the key: --api-key KEY, or VISIONSTREAM_API_KEY in the environment"
    if "workflow_specification" in said:
        return "\n  a workflow of your own: --workflow FILE.json"
    return ""


def _turn_server(args: argparse.Namespace) -> dict[str, str] | None:
    """``--turn`` and its credentials as an ``iceServers`` entry; the password may come from
    the environment, so it is in no shell history."""
    if not args.turn:
        return None
    password = args.turn_password or os.environ.get("VISIONSTREAM_TURN_PASSWORD", "")
    return {"urls": args.turn, "username": args.turn_user or "", "credential": password}
