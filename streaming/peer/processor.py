"""Per-frame work of one session, run in a worker thread: workflow, output frame, result bytes.

Also owns which outputs feed the video track and the data channel (reference §1.1, §2.3), since
clients may switch both at run time.
"""

from __future__ import annotations

import gzip
import math
import time
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Any

import av
import cv2
import numpy as np

from sources.base import SourceFrame

from ..errors import InvalidRequest
from ..protocol.messages import ResultMessage, VideoMetadata, error_codes
from ..protocol.notices import Notice, NoticeCode
from ..watching import image_in
from ..workflows.blocks.base import FrameState, WorkflowImage
from ..workflows.engine import CompiledWorkflow
from ..workflows.runner import FrameFacts, WorkflowOutputs, run_frame
from ..workflows.serialization import SerializationError, serialize_value

__all__ = ["DataMode", "FrameProcessor", "OutputSelection", "ProcessedFrame"]

NO_VISUALISATION_ERRORS = [
    "Visualisation blocks were not executed",
    "or workflow was not configured to output visuals.",
    "Please try to adjust the scene so models detect objects",
    "or stop preview, update workflow and try again.",
]


class DataMode(Enum):
    """Which workflow outputs go in each result message: none, all, or those named."""

    NONE = "none"
    ALL = "all"
    SPECIFIC = "specific"


def _names(value: list[str | None] | None) -> list[str]:
    return [v for v in (value or []) if v]


@dataclass
class OutputSelection:
    """Which output is rendered (None: no video) and which go over the data channel."""

    stream_output: str | None
    data_mode: DataMode
    data_names: list[str]

    @classmethod
    def from_request(
        cls,
        workflow: WorkflowOutputs,
        stream_output: list[str | None] | None,
        data_output: list[str | None] | None,
    ) -> OutputSelection:
        """Validate against the workflow's outputs; unknown names are a 400 naming them."""
        known = workflow.output_names
        stream: str | None
        if stream_output is None:
            images = workflow.image_outputs()
            # No image output: an empty name makes frames go back raw with advisory errors.
            stream = images[0] if images else ""
        else:
            names = _names(stream_output)
            stream = names[0] if names else None
            if stream is not None and stream not in known:
                raise InvalidRequest(
                    f"stream_output '{stream}' is not an output of the workflow "
                    f"(outputs: {', '.join(known)})"
                )
        mode, data_names = cls.parse_data_output(data_output)
        unknown = [n for n in data_names if n not in known]
        if unknown:
            raise InvalidRequest(
                f"data_output {unknown} not among the workflow's outputs ({', '.join(known)})"
            )
        return cls(stream, mode, data_names)

    @staticmethod
    def parse_data_output(value: list[str | None] | None) -> tuple[DataMode, list[str]]:
        names = _names(value)
        if not names:
            return DataMode.NONE, []
        if names == ["*"]:
            return DataMode.ALL, []
        return DataMode.SPECIFIC, names


@dataclass(frozen=True)
class FrameJob:
    """One frame's work, handed to the processor's thread whole: nothing in it is shared
    with the session loop afterwards (``errors`` is this frame's own list)."""

    frame: av.VideoFrame | SourceFrame
    facts: FrameFacts
    """The frame's number, arrival, stream rate, file or live: its ``video_metadata``."""
    queue_wait_ms: float
    errors: list[Notice]
    extra_metadata: dict[str, Any]
    """Keys added to ``video_metadata`` (the previous send time, drops so far)."""
    render: bool
    """Whether a video frame is wanted back (someone receives the session's video)."""
    outputs: dict[str, Any] | None = None
    """The workflow's outputs when they exist already (a watched pipeline's)."""


@dataclass
class ProcessedFrame:
    """One frame's outcome: the frame to send back (if any), the result message, stage times."""

    video_frame: av.VideoFrame | None
    payload: bytes
    stage_ms: dict[str, float]


class FrameProcessor:
    """Runs a session's compiled workflow on one frame and builds what goes back: the rendered
    frame and the (gzipped) result message. Blocking: called on a worker thread."""

    def __init__(
        self,
        workflow: CompiledWorkflow | None,
        outputs: WorkflowOutputs,
        selection: OutputSelection,
        *,
        jpeg_quality: int,
        gzip_level: int,
    ) -> None:
        """``workflow``: None for a session that shows a pipeline's outputs (every job
        brings its outputs); ``outputs``: what the session may select from."""
        self.workflow = workflow
        self.outputs = outputs
        self.selection = selection
        self._jpeg_quality = jpeg_quality
        self._gzip_level = gzip_level
        self._pts_origin: int | None = None

    def process(self, job: FrameJob) -> ProcessedFrame:
        """Blocking: run in a worker thread."""
        frame, facts, errors = job.frame, job.facts, job.errors
        frame_id, outputs = facts.frame_number, job.outputs
        started = time.perf_counter()
        selection = self.selection  # one consistent view even if a control message swaps it
        # A decoded file's frame is converted (and turned upright) here, on the worker.
        image = frame.image if isinstance(frame, SourceFrame) else frame.to_ndarray(format="bgr24")
        state = FrameState()
        state.timer["convert"] = (time.perf_counter() - started) * 1000
        time_base = float(frame.time_base) if frame.time_base is not None else None
        if outputs is None:  # else a pipeline this session watches already ran the workflow
            assert self.workflow is not None  # a session without one gets every job's outputs
            run = run_frame(self.workflow, image, facts, state)
            outputs = run.outputs
            if run.error is not None:  # a failing frame must not end the session
                failure = (
                    f"workflow failed on frame {frame_id}: {type(run.error).__name__}: {run.error}"
                )
                errors.append(Notice(NoticeCode.WORKFLOW_ERROR, failure))

        video_frame = None
        if job.render and selection.stream_output is not None:
            t0 = time.perf_counter()
            rendered = image_in(outputs.get(selection.stream_output))
            if rendered is None:
                rendered = image
                errors.extend(
                    Notice(NoticeCode.NO_VISUALISATION, line) for line in NO_VISUALISATION_ERRORS
                )
                _draw_advisory(rendered)
            video_frame = _yuv420p_frame(rendered)
            if self._pts_origin is None:
                self._pts_origin = frame.pts
            pts = self._outbound_pts(frame.pts)
            video_frame.pts, video_frame.time_base = wire_timestamp(pts, frame.time_base)
            state.timer["output_frame"] = (time.perf_counter() - t0) * 1000

        t0 = time.perf_counter()
        data = self._serialize(outputs, selection, errors, facts.video_metadata())
        state.timer["serialize"] = (time.perf_counter() - t0) * 1000
        timer = state.timer
        metadata = VideoMetadata(
            frame_id=frame_id,
            received_at=facts.received_at,
            pts=self._outbound_pts(frame.pts),
            time_base=time_base,
            declared_fps=facts.fps,
            width=image.shape[1],
            height=image.shape[0],
            queue_wait_ms=round(job.queue_wait_ms, 3),
            inference_ms=round(timer.get("inference", 0.0), 3),
            processing_ms=round((time.perf_counter() - started) * 1000, 3),
            stage_ms={k: round(v, 3) for k, v in timer.items()},
            extra=job.extra_metadata,
        )
        payload = ResultMessage(
            video_metadata={**metadata.to_dict(), **error_codes(errors)},
            serialized_output_data=data,
            errors=[n.message for n in errors],
        ).to_json()
        if selection.data_mode is not DataMode.NONE:
            payload = gzip.compress(payload, compresslevel=self._gzip_level)
        return ProcessedFrame(video_frame, payload, timer)

    def _outbound_pts(self, pts: int | None) -> int | None:
        """``pts`` counted from the first frame returned on the video track.

        A receiver counts a track's timestamps from the first frame it gets (aiortc's and
        browsers' alike), so results pair with frames by pts only if the messages count from
        that frame too. Copied unchanged, they count from the first input frame instead,
        which a realtime session may drop before processing: then no result ever paired.
        Before any frame went back (or with none to return) pts stay as they came.
        """
        if pts is None or self._pts_origin is None:
            return pts
        return pts - self._pts_origin

    def _serialize(
        self,
        outputs: dict[str, Any],
        selection: OutputSelection,
        errors: list[Notice],
        workflow_metadata: dict[str, Any],
    ) -> dict[str, Any] | None:
        if selection.data_mode is DataMode.NONE:
            return None
        if selection.data_mode is DataMode.ALL:
            names = [n for n, v in outputs.items() if not isinstance(v, WorkflowImage)]
        else:
            names = selection.data_names
        data: dict[str, Any] = {}
        for name in names:
            if name not in outputs:
                errors.append(Notice(NoticeCode.OUTPUT_NOT_FOUND, f"Output '{name}' not found"))
                continue
            try:
                data[name] = serialize_value(outputs[name], self._jpeg_quality, workflow_metadata)
            except (SerializationError, ValueError, TypeError) as exc:
                data[name] = {"__serialization_error__": str(exc)}
                unserializable = f"output '{name}' could not be serialized: {exc}"
                errors.append(Notice(NoticeCode.SERIALIZATION_ERROR, unserializable))
        return data or None


def _yuv420p_frame(image: np.ndarray) -> av.VideoFrame:
    """BGR -> the encoder's yuv420p here, in the worker thread, not in aiortc's encoder.

    OpenCV's I420 conversion takes 0.24 ms at 640x480 where PyAV's reformat takes 1.35 ms.
    I420 needs even sizes; odd ones take PyAV's path.
    """
    h, w = image.shape[:2]
    if h % 2 or w % 2:
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
        return frame.reformat(format="yuv420p")
    planes = np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420), dtype=np.uint8)
    return av.VideoFrame.from_ndarray(planes, format="yuv420p")


_RTP_CLOCK = Fraction(1, 90000)
_ENCODER_CLOCK = Fraction(1, 1_000_000)


def wire_timestamp(pts: int | None, time_base: Fraction | None) -> tuple[int | None, Any]:
    """The (pts, time_base) to hand aiortc so the RTP timestamp equals the input's exactly.

    aiortc's VP8 encoder rebases each frame to a 1 µs clock (rounding) and then converts
    back to 90 kHz by truncation, turning e.g. 3000 into 2999: returned frames would drift a
    tick from the pts in the result messages (the upstream bug behind SDK PR #2640).
    Giving it the smallest µs value whose truncation lands on the input's 90 kHz tick makes
    both conversions exact.
    """
    if pts is None or time_base is None:
        return pts, time_base
    ticks = pts * Fraction(time_base) / _RTP_CLOCK
    if ticks.denominator != 1:
        return pts, time_base  # not on the RTP clock: nothing exact to preserve
    return math.ceil(ticks * _RTP_CLOCK / _ENCODER_CLOCK), _ENCODER_CLOCK


def _draw_advisory(image: np.ndarray) -> None:
    for i, line in enumerate(NO_VISUALISATION_ERRORS):
        cv2.putText(image, line, (10, 30 + 25 * i), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 255, 0), 2)
