"""Events on disk, the way operators of camera systems expect them (Frigate's snapshots and
clips, DeepStream's smart record): one JSON line per event in ``<name>.jsonl``, and beside it
in ``<name>/`` the event's evidence, a JPEG snapshot and an MP4 clip from ``pre_s`` before
the event to ``post_s`` after it, kept within retention limits (count, age, bytes).

The caller's thread only appends to a ring of JPEG-encoded frames (bounded by ``pre_s`` and
``max_ring_frames``: raw 640x480 frames for 5 s would be 140 MB per stream); clips and
snapshots are written, and old evidence removed, on a thread of its own. Files appear whole:
each is written under a hidden name and renamed when complete.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from .jsonl import JsonLinesWriter
from .retention import Kept, Limits, remove_oldest
from .video import VideoRecorder
from .worker import QueueWorker

__all__ = ["EventLog", "Retention"]

log = logging.getLogger(__name__)

_JPEG_QUALITY = 80
_SLACK_S = 1e-3
"""Clock slack: timestamps of ~1.8e9 s carry float error, and a frame exactly ``pre_s``
before the event belongs in its clip."""


@dataclass(frozen=True)
class Retention:
    """Evidence kept at most: the oldest events' files go first. The JSON lines stay."""

    max_events: int = 1000
    max_age_s: float = 7 * 24 * 3600.0
    max_bytes: int = 1 << 30


@dataclass
class _Clip:
    path: Path
    until: float
    frames: list[tuple[float, bytes]] = field(default_factory=list)


class EventLog:
    """``event`` writes one line and schedules its evidence; ``observe`` feeds every frame
    (the pre-roll ring and clips waiting for their post-roll). One caller thread."""

    def __init__(
        self,
        directory: str | Path,
        name: str,
        *,
        pre_s: float = 5.0,
        post_s: float = 5.0,
        snapshot: bool = True,
        retention: Retention = Retention(),
        max_ring_frames: int = 300,
        max_pending_clips: int = 4,
    ) -> None:
        self.evidence = Path(directory) / name
        self.evidence.mkdir(parents=True, exist_ok=True)
        self.name = name
        self._lines = JsonLinesWriter(Path(directory) / f"{name}.jsonl", append=True)
        self._pre_s, self._post_s = pre_s, post_s
        self._clips = pre_s > 0 or post_s > 0
        self._snapshot = snapshot
        self._retention = retention
        self._ring: deque[tuple[float, bytes]] = deque(maxlen=max_ring_frames)
        self._pending: list[_Clip] = []
        self._max_pending = max_pending_clips
        self._jobs: QueueWorker[tuple[str, Path, Any]] = QueueWorker(
            f"events {name}", self._write_job, lazy=True
        )
        self._closed = False
        self.written = 0
        """Evidence files written (for tests and stats)."""

    def observe(self, image: np.ndarray, seconds: float) -> None:
        """A frame of the stream at ``seconds`` (its own clock)."""
        if not self._clips or self._closed:
            return
        jpeg = _jpeg(image)
        if jpeg is None:
            return
        self._ring.append((seconds, jpeg))
        while self._ring and seconds - self._ring[0][0] > self._pre_s + _SLACK_S:
            self._ring.popleft()
        for clip in list(self._pending):
            clip.frames.append((seconds, jpeg))
            if seconds >= clip.until - _SLACK_S:
                self._pending.remove(clip)
                self._submit("clip", clip.path, clip.frames)

    def event(
        self, record: dict[str, Any], image: np.ndarray | None, seconds: float
    ) -> dict[str, Any]:
        """Logs ``record`` (plus the event's id, time and evidence file names); the snapshot
        is ``image``. Returns the line written: ``event_id``, and ``snapshot`` and ``clip``
        relative to the directory (None when not kept)."""
        now = datetime.now(UTC)
        event_id = f"{now:%Y%m%dT%H%M%S%f}-{secrets.token_hex(3)}"
        line: dict[str, Any] = {"event_id": event_id, "time": now.isoformat(), **record}
        line["snapshot"] = line["clip"] = None
        if self._snapshot and image is not None and not self._closed:
            line["snapshot"] = f"{self.name}/{event_id}.jpg"
            self._submit("snapshot", self.evidence / f"{event_id}.jpg", image.copy())
        if self._clips and not self._closed:
            if len(self._pending) < self._max_pending:
                clip = _Clip(self.evidence / f"{event_id}.mp4", seconds + self._post_s)
                start = seconds - self._pre_s - _SLACK_S
                clip.frames.extend(f for f in self._ring if f[0] >= start)
                self._pending.append(clip)
                line["clip"] = f"{self.name}/{event_id}.mp4"
            else:  # events faster than clips can end: this one's frames are in the others
                line["clip_skipped"] = f"{self._max_pending} clips already recording"
        self._lines.write(line)
        return line

    def _submit(self, kind: str, path: Path, data: Any) -> None:
        self._jobs.put((kind, path, data))

    def _write_job(self, job: tuple[str, Path, Any]) -> None:
        kind, path, data = job
        hidden = path.with_name(f".{path.name}")
        try:
            if kind == "snapshot":
                ok, encoded = cv2.imencode(".jpg", data, [cv2.IMWRITE_JPEG_QUALITY, 90])
                if not ok:
                    raise ValueError("the image could not be encoded")
                hidden.write_bytes(encoded.tobytes())
            else:
                _write_clip(hidden, data)
            os.replace(hidden, path)
            self.written += 1
        except Exception as exc:  # one failed file never stops the others
            log.warning("event evidence %s not written: %s", path.name, exc)
            hidden.unlink(missing_ok=True)
        self._enforce_retention()

    def _enforce_retention(self) -> None:
        try:
            files = [
                (entry.stat().st_mtime, entry.stat().st_size, Path(entry.path))
                for entry in os.scandir(self.evidence)
                if entry.is_file() and not entry.name.startswith(".")
            ]
        except OSError:
            return
        events: dict[str, list[tuple[float, int, Path]]] = {}
        for item in files:  # an event's snapshot and clip go together
            events.setdefault(item[2].stem, []).append(item)
        kept = [
            Kept(min(f[0] for f in group), sum(f[1] for f in group), tuple(f[2] for f in group))
            for group in events.values()
        ]
        limits = self._retention
        remove_oldest(kept, Limits(limits.max_events, limits.max_age_s, limits.max_bytes))

    def close(self) -> None:
        """Clips still waiting for their post-roll are written with what they have; waits
        for the writer. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for clip in self._pending:
            self._submit("clip", clip.path, clip.frames)
        self._pending.clear()
        self._ring.clear()
        self._jobs.close(timeout_s=60)
        self._lines.close()


def _jpeg(image: np.ndarray) -> bytes | None:
    ok, encoded = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, _JPEG_QUALITY])
    return encoded.tobytes() if ok else None


def _write_clip(path: Path, frames: list[tuple[float, bytes]]) -> None:
    if not frames:
        raise ValueError("no frames were seen around the event")
    span = frames[-1][0] - frames[0][0]
    fps = (len(frames) - 1) / span if span > 0 else 30.0
    with VideoRecorder(path, fps=max(1.0, min(fps, 60.0))) as recorder:
        for seconds, jpeg in frames:
            image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
            if image is not None:  # our own encoding: always decodes
                recorder.write(image, seconds)
