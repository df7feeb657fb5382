"""Request and reference models of the headless pipelines API (reference: pipelines-api.md §1)."""

from __future__ import annotations

import os
import re
from collections.abc import Container, Mapping
from dataclasses import dataclass, replace
from typing import Annotated, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sinks.jsonl import JsonlSinkConfiguration
from sinks.masking import mask_url
from sinks.restream.push_targets import PUSH_SCHEMES
from sinks.video import VideoFileSinkConfiguration
from sinks.webhook import WebhookSinkConfiguration
from sources.kinds import CAMERA, FOREIGN_SCHEMES, KINDS, kind_of, scheme_of, schemes_text

from ..buffering import Consumption, Filling
from ..errors import InvalidRequest, StreamingError
from ..events.describer import DescribeConfiguration
from ..protocol.messages import WorkflowConfiguration

__all__ = [
    "WHIP_SCHEMES",
    "AddSourcePayload",
    "ConsumePayload",
    "InitialisePipelinePayload",
    "LocalSourceRefused",
    "MotionGating",
    "PushTarget",
    "RestreamConfiguration",
    "SinkConfiguration",
    "SourceReference",
    "VideoConfiguration",
    "path_number",
    "resolve_references",
]

# Schemes a caller may write: every kind's that callers may name, and the reference's others.
_KNOWN_SCHEMES = (
    *(scheme for kind in KINDS if kind.named_by_callers for scheme in kind.schemes),
    *FOREIGN_SCHEMES,
)
_EXPLICIT_PATH = re.compile(r"^(/|\./|\.\./|\.\\|\.\.\\|[A-Za-z]:[\\/])")
_RELATIVE_FILE = re.compile(r"\w[\w.\-/\\]*\.[A-Za-z0-9]{1,8}")
"""A relative path to a file with an extension (``clip.mp4``, ``videos/door.mkv``): what the
published SDK's users write. A bare word (``camera1``) is more likely a mistyped URL."""


def path_number(text: str, max_digits: int = 9) -> int | None:
    """A number as a URL path carries it (a source id, a segment's sequence), None when the
    text is not one: ASCII digits only, since ``"¹".isdigit()`` is true and ``int()`` then
    raises, and bounded in length."""
    if text.isascii() and text.isdigit() and len(text) <= max_digits:
        return int(text)
    return None


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class VideoConfiguration(_Lenient):
    """Where a pipeline's frames come from and how they are buffered (the reference's fields)."""

    type: Literal["VideoConfiguration"]
    video_reference: str | int | list[str | int]
    max_fps: float | None = Field(default=None, gt=0)
    source_buffer_filling_strategy: Filling | None = None
    source_buffer_consumption_strategy: Consumption | None = None
    video_source_properties: dict[str, float | str] | None = None
    batch_collection_timeout: float | None = Field(default=None, ge=0)
    sub_streams: dict[str, str] | None = Field(default=None, max_length=256)
    """Ours: a camera's sub-stream, by its main stream's URL (as in ``video_reference``):
    the sub-stream is decoded (detection, viewers), the main one only recorded."""

    @field_validator("video_reference")
    @classmethod
    def _references(cls, value: object) -> object:
        for reference in value if isinstance(value, list) else [value]:
            _check_reference(reference)
        if isinstance(value, list) and not value:
            raise ValueError("video_reference must not be an empty list")
        return value

    @field_validator("sub_streams")
    @classmethod
    def _sub_streams(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for sub in (value or {}).values():
            _check_reference(sub)
        return value

    @model_validator(mode="after")
    def _mains_listed(self) -> VideoConfiguration:
        given = self.video_reference
        listed = set(given) if isinstance(given, list) else {given}
        for main in self.sub_streams or {}:
            if main not in listed:
                raise ValueError(f"sub_streams names {mask_url(main)}, not in video_reference")
        return self

    def sub_stream_of(self, reference: str | int) -> str | None:
        return (self.sub_streams or {}).get(reference) if isinstance(reference, str) else None


class AddSourcePayload(_Lenient):
    """Ours: ``POST /inference_pipelines/{id}/sources``, one more source for a running
    pipeline, read and buffered as its others are."""

    video_reference: str | int
    api_key: str | None = None
    sub_stream: str | None = None
    """A camera's sub-stream to decode instead (``sub_streams``)."""

    @field_validator("video_reference", "sub_stream")
    @classmethod
    def _reference(cls, value: object) -> object:
        if value is not None:
            _check_reference(value)
        return value


class RecordConfiguration(_Lenient):
    """Ours: record each camera source as it sends (no re-encoding of H.264/H.265) into MP4
    segments under ``VISIONSTREAM_SINK_DIR/recordings/<pipeline>/<source>/``."""

    mode: Literal["continuous", "events"] = "continuous"
    """``events``: only from ``pre_seconds`` before each event of the source's workflow
    (line crossing, zone entry or exit, event sink) to ``post_seconds`` after it."""
    segment_seconds: float = Field(default=60.0, ge=1, le=3600)
    pre_seconds: float = Field(default=10.0, ge=0, le=300)
    post_seconds: float = Field(default=10.0, ge=0, le=3600)
    max_age_hours: float | None = Field(default=168.0, gt=0)
    max_gigabytes: float | None = Field(default=20.0, gt=0)
    """This source's recordings at most; the oldest segments go first."""
    source_ids: list[int] | None = None
    """The sources recorded (their ids, as ``sources`` numbers them); None: every camera."""


class SinkConfiguration(_Lenient):
    """The reference's memory sink, plus our optional extra sinks: each field whose type is a
    ``sinks.base.SinkSettings`` is a pipeline sink the fan-out opens when it is set."""

    type: Literal["MemorySinkConfiguration"] = "MemorySinkConfiguration"
    results_buffer_size: int = Field(default=64, ge=0, le=100_000)
    jsonl: JsonlSinkConfiguration | None = None
    video_file: VideoFileSinkConfiguration | None = None
    webhook: WebhookSinkConfiguration | None = None
    record: RecordConfiguration | None = None


_Fraction = Annotated[float, Field(ge=0, le=1)]
_Polygon = Annotated[list[tuple[_Fraction, _Fraction]], Field(min_length=3, max_length=64)]


class MotionGating(_Lenient):
    """Ours: run the workflow's models only on frames where something moved
    (``pipelines.motion``); on a still frame they give their last outputs again."""

    enabled: bool | None = None
    """None: on for cameras (and WHIP publishers), off for files and local devices."""
    ignore: list[_Polygon] = Field(default_factory=list, max_length=32)
    """Regions where motion does not count (a clock, trees): polygons of ``[x, y]`` points
    in fractions of the frame's width and height."""
    threshold: int = Field(default=25, ge=1, le=255)
    """How much a grey level must change (of 255) for a pixel to have moved."""
    min_area: float = Field(default=0.002, gt=0, le=1)
    """The fraction of the frame that must move for the frame to count as moving."""
    refresh_seconds: float = Field(default=5.0, gt=0, le=3600)
    """The models run at least this often (the stream's seconds) however still it is."""
    width: int = Field(default=320, ge=32, le=1920)
    """Width of the grey copy motion is measured on (its height keeps the aspect)."""

    def applies_to(self, kind: str) -> bool:
        """Whether a source of ``kind`` (``SourceReference.kind``) is gated."""
        return self.enabled if self.enabled is not None else kind == "camera"


WHIP_SCHEMES = ("http", "https")
"""A push to an ``http(s)://`` URL is a WHIP publication (``peer/whip_push.py``)."""


class PushTarget(BaseModel):
    """One server a source's annotated picture is pushed to (``sinks/restream/push.py``)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=2048)
    """``rtmp(s)://``, ``rtsp(s)://`` (ANNOUNCE/RECORD), ``srt://``, or a WHIP endpoint
    (``http(s)://``); checked against ``VISIONSTREAM_ALLOWED_NETWORKS`` each time it connects."""
    source_id: int = Field(default=0, ge=0)
    """Which of the pipeline's sources (its index in ``video_reference``)."""
    token: str | None = Field(default=None, max_length=4096)
    """A WHIP endpoint's bearer token (``Authorization: Bearer``); never shown."""

    @field_validator("url")
    @classmethod
    def _scheme(cls, url: str) -> str:
        scheme = urlsplit(url).scheme.lower()
        if scheme not in (*PUSH_SCHEMES, *WHIP_SCHEMES):
            schemes = ", ".join(f"{s}://" for s in (*PUSH_SCHEMES, *WHIP_SCHEMES))
            raise ValueError(f"a push goes to {schemes}, not {scheme or url!r}")
        if not urlsplit(url).hostname:
            raise ValueError("a push URL names a host")
        return url


class RestreamConfiguration(BaseModel):
    """Ours: where a pipeline's annotated picture is pushed as it runs."""

    model_config = ConfigDict(extra="forbid")

    push: list[PushTarget] = Field(default_factory=list, max_length=8)


class InitialisePipelinePayload(_Lenient):
    """``POST /inference_pipelines/initialise``: sources, workflow, sinks."""

    api_key: str | None = None
    video_configuration: VideoConfiguration
    processing_configuration: WorkflowConfiguration
    sink_configuration: SinkConfiguration = Field(default_factory=SinkConfiguration)
    consumption_timeout: float | None = Field(default=None, gt=0)
    decoding_buffer_size: int = Field(default=64, ge=1, le=1024)
    motion_gating: MotionGating = Field(default_factory=MotionGating)
    describe: DescribeConfiguration | None = None
    """Descriptions of its events by a vision-language model (``events/describer.py``);
    None: none (the default)."""
    restream: RestreamConfiguration | None = None
    """Ours: pushes of its sources' annotated picture (RTMP, RTSP, SRT, WHIP); its players need
    nothing here (``GET /inference_pipelines/{id}/restream``)."""


class ConsumePayload(_Lenient):
    """``POST /inference_pipelines/{id}/consume``."""

    api_key: str | None = None
    excluded_fields: list[str] = Field(default_factory=list)
    wait_seconds: float = Field(default=0.0, ge=0, le=30)
    """Ours: with an empty buffer, wait up to this long for a result (a long poll)."""


class LocalSourceRefused(StreamingError):
    """A remote caller named a file or device on the server's own machine."""

    status = 403
    code = "local_source_refused"


@dataclass(frozen=True)
class SourceReference:
    """One entry of ``video_reference``, classified (camera URL, local file or device)."""

    source_id: int
    reference: str | int
    kind: Literal["camera", "file", "device"]
    detect: str | None = None
    """A camera's sub-stream: decoded for the workflow, while ``reference`` (the main
    stream) is read only for its packets (recorded, never decoded)."""

    @property
    def decoded(self) -> str | int:
        """What is decoded for the workflow and viewers."""
        return self.detect if self.detect is not None else self.reference

    @property
    def shown(self) -> str:
        """As status shows it: credentials and query removed (the reference's rule)."""
        return self.shown_of(self.reference)

    @staticmethod
    def shown_of(reference: str | int) -> str:
        if isinstance(reference, int):
            return str(reference)
        parts = urlsplit(mask_url(reference))
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _check_reference(reference: object) -> None:
    """The reference's syntax rules (a 422 when broken); policy comes later."""
    if isinstance(reference, bool) or not isinstance(reference, str | int):
        raise ValueError("video_reference entries are URLs, paths or device indexes")
    if isinstance(reference, int):
        return
    if any(c.isspace() or c in "\"'" for c in reference):
        raise ValueError("video_reference must not contain whitespace or quotes")
    if "://" in reference:
        parts = urlsplit(reference)
        if parts.scheme.lower() not in _KNOWN_SCHEMES:
            raise ValueError(f"video_reference scheme '{parts.scheme}' is not supported")
        if parts.scheme.lower() != "file" and not parts.hostname:
            raise ValueError(f"video_reference {mask_url(reference)} has no host")
        return
    path = _EXPLICIT_PATH.match(reference) or _RELATIVE_FILE.fullmatch(reference)
    if not path or any(c in reference for c in "!="):
        raise ValueError(
            "video_reference must be a URL, a path to a file (clip.mp4, ./clip.mp4, "
            "/videos/clip.mp4) or a device index"
        )


def resolve_references(
    value: str | int | list[str | int],
    allow_local: bool,
    published: Container[str] = (),
    sub_streams: Mapping[str, str] | None = None,
) -> list[SourceReference]:
    """Classify each reference; local ones are refused unless the server allows them.
    ``published``: the server's own stream URLs (a WHIP publisher's), read as cameras are.
    ``sub_streams``: a camera's sub-stream by its URL (both must be camera URLs)."""
    resolved = _resolve(value, allow_local, published)
    given = value if isinstance(value, list) else [value]  # as written (a path is made absolute)
    for main, sub in (sub_streams or {}).items():
        if kind_of(sub) is not CAMERA:
            raise InvalidRequest(f"sub-stream {mask_url(sub)}: not a camera URL")
        _resolve(sub, allow_local=False, published=())  # what this machine cannot read
        for i, ref in enumerate(resolved):
            if given[ref.source_id] == main:
                if ref.kind != "camera" or ref.reference in published:
                    raise InvalidRequest(f"{ref.shown}: only a camera URL has a sub-stream")
                resolved[i] = replace(ref, detect=sub)
    return resolved


def _resolve(
    value: str | int | list[str | int], allow_local: bool, published: Container[str]
) -> list[SourceReference]:
    resolved = []
    for source_id, reference in enumerate(value if isinstance(value, list) else [value]):
        if isinstance(reference, str) and reference in published:
            resolved.append(SourceReference(source_id, reference, "camera"))
            continue
        source_kind = kind_of(reference)
        if source_kind is None or not source_kind.named_by_callers:
            raise InvalidRequest(
                f"video_reference {mask_url(str(reference))}: this server reads "
                f"{schemes_text(CAMERA.schemes)} streams"
            )
        if problem := source_kind.problem(str(reference)):
            raise InvalidRequest(f"video_reference {mask_url(str(reference))}: {problem}")
        # Read by a pipeline's own feed (files), or shared through the hub: a local device,
        # or a camera (any URL kind the hub opens).
        kind: Literal["camera", "file", "device"] = (
            "file" if source_kind.open is None else "device" if source_kind.local else "camera"
        )
        if source_kind.local and not allow_local:
            what = "device" if kind == "device" else "local file"
            raise LocalSourceRefused(
                f"video_reference {reference!r} is a {what} on the server: refused "
                "(set VISIONSTREAM_ALLOW_LOCAL_SOURCES=true to allow local sources)"
            )
        if kind == "file" and isinstance(reference, str) and not scheme_of(reference):
            # A relative path is the server's working directory's (where it was started):
            # made absolute now, so the status says which file it is and a restart from
            # elsewhere reads the same one.
            reference = os.path.abspath(reference)
        resolved.append(SourceReference(source_id, reference, kind))
    return resolved
