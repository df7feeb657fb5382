"""Every kind of video source a reference can name, in one table: the only place that knows
URL schemes.

A reference is a URL (``scheme://host/...``), a path, or a local camera (an index such as
``0``, or ``/dev/video0``). Each ``SourceKind`` says which schemes it owns, whether a caller
may name it in a request, whether it is on the server's own machine (local: refused for
callers unless the server allows local sources), why it cannot be read on this machine (a
missing helper program), and how the shared hub opens it. A new URL-based kind is its reader
module plus one entry here; every check (pipeline references, a session's camera fields, the
client's sources) and every opening (the hub, in the server and in Ray actors) reads this table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from sinks.masking import mask_url
from sinks.pinning import Pin

from .base import FrameSource, SourceError
from .live import LiveSource
from .schemes import CAMERA_SCHEMES, scheme_for, scheme_of
from .srt import relay_missing
from .webcam import CameraSource, CaptureFactory, is_device

__all__ = [
    "CAMERA",
    "DEVICE",
    "FILE",
    "FOREIGN_SCHEMES",
    "KINDS",
    "MJPEG_SCHEMES",
    "PUBLISHED",
    "PUBLISHED_SCHEME",
    "RTSP_SCHEMES",
    "Opening",
    "SourceKind",
    "has_scheme_and_host",
    "kind_of",
    "open_source",
    "opener",
    "scheme_of",
    "schemes_text",
]


@dataclass(frozen=True)
class Opening:
    """What opening a source needs from its owner (the server's settings, or a test's)."""

    read_timeout: float = 5.0
    max_backoff: float = 10.0
    capture_factory: CaptureFactory | None = None
    """Injected in place of OpenCV's capture for local cameras (tests)."""
    published: Callable[[str], FrameSource] | None = None
    """Opens this server's own ``whip://`` streams (its WHIP publishers); None: there are none."""
    hwaccel: str | None = None
    """Cameras' hardware decoding (FFmpeg's device type, ``cuda``, ``vaapi``...); None: none."""
    decoder_threads: int = 1
    pin: Pin | None = None
    """Cameras' addresses checked as each connection is made (the egress policy's)."""


Open = Callable[[str, Opening], FrameSource]


@dataclass(frozen=True)
class SourceKind:
    """One kind of source and everything the rest of the code asks about it."""

    name: str
    schemes: tuple[str, ...]
    """The URL schemes it owns (none: named by a path or a device index)."""
    local: bool
    """On the server's own machine: a caller may name it only where local sources are allowed."""
    named_by_callers: bool
    """A caller may write it in a request (``whip://`` URLs are the server's own)."""
    open: Open | None
    """How the shared hub opens it; None: not read through the hub (files, read by a pipeline)."""
    problem: Callable[[str], str | None] = lambda url: None
    """Why a URL of this kind cannot be read on this machine, or None when it can."""


def _open_camera(url: str, opening: Opening, decode: bool = True) -> FrameSource:
    return LiveSource(
        url,
        read_timeout=opening.read_timeout,
        max_backoff=opening.max_backoff,
        decode=decode,
        hwaccel=opening.hwaccel,
        threads=opening.decoder_threads,
        pin=opening.pin,
    )


def _open_device(reference: str, opening: Opening) -> FrameSource:
    device = int(reference) if reference.isascii() and reference.isdigit() else reference
    return CameraSource(device, None, opening.capture_factory)


def _open_published(url: str, opening: Opening) -> FrameSource:
    if opening.published is None:
        raise SourceError(f"{url}: this server takes no published streams")
    return opening.published(url)


def _camera_problem(url: str) -> str | None:
    return relay_missing() if scheme_for(url).relayed else None


PUBLISHED_SCHEME = "whip://"
"""URLs of streams published to this server (a WHIP publisher's ``whip://<resource id>``)."""

CAMERA = SourceKind(
    "camera",
    tuple(CAMERA_SCHEMES),
    local=False,
    named_by_callers=True,
    open=_open_camera,
    problem=_camera_problem,
)
"""A network camera or stream, read by ``LiveSource`` (PyAV; SRT through its relay)."""
PUBLISHED = SourceKind(
    "published", ("whip",), local=False, named_by_callers=False, open=_open_published
)
"""A stream a WHIP publisher sends to this server (``streaming/peer/publisher.py``)."""
DEVICE = SourceKind("device", (), local=True, named_by_callers=True, open=_open_device)
"""A camera on the server's machine, read by OpenCV (``CameraSource``)."""
FILE = SourceKind("file", ("file",), local=True, named_by_callers=True, open=None)
"""A video file on the server's machine (a path or ``file://``), read by a pipeline's feed."""

KINDS = (CAMERA, PUBLISHED, DEVICE, FILE)

FOREIGN_SCHEMES = ("rtspt", "rtspst", "rtp", "tcp", "csi")
"""Schemes the reference's pipelines accept that this server does not read: well-formed in a
request (so the refusal can say what is read instead), never opened."""

RTSP_SCHEMES = ("rtsp", "rtsps")
"""What a session's ``rtsp_url`` (and the client's ``RTSPSource``) may be."""
MJPEG_SCHEMES = ("http", "https")
"""What a session's ``mjpeg_url`` (and the client's ``MJPEGSource``) may be."""


def kind_of(reference: str | int) -> SourceKind | None:
    """The kind a reference names; None for a URL whose scheme no kind owns."""
    if isinstance(reference, int) or is_device(reference):
        return DEVICE
    scheme = scheme_of(reference)
    if not scheme:
        return FILE
    return next((kind for kind in KINDS if scheme in kind.schemes), None)


def schemes_text(schemes: tuple[str, ...]) -> str:
    """``rtsp://, rtsps://`` for messages."""
    return ", ".join(f"{scheme}://" for scheme in schemes)


def has_scheme_and_host(url: str, schemes: tuple[str, ...]) -> bool:
    """``url`` is ``scheme://host...`` with one of ``schemes``."""
    try:
        parts = urlsplit(url)
        return parts.scheme.lower() in schemes and bool(parts.hostname)
    except ValueError:  # e.g. a port that is not a number
        return False


def open_source(reference: str, opening: Opening, decode: bool = True) -> FrameSource:
    """Opens what the hub shares: a camera, a local device or a published stream.
    ``SourceError`` for anything else (or what this machine cannot read). Not ``decode``:
    a camera read for its packets only (a sub-stream's main stream, recorded)."""
    kind = kind_of(reference)
    if kind is None or kind.open is None:
        raise SourceError(f"{mask_url(reference)} is not a source the hub opens")
    if problem := kind.problem(reference):
        raise SourceError(problem)
    if not decode:
        if kind is not CAMERA:
            raise SourceError(f"{mask_url(reference)}: only a camera URL is read undecoded")
        return _open_camera(reference, opening, decode=False)
    return kind.open(reference, opening)


def opener(opening: Opening) -> Callable[[str, bool], FrameSource]:
    """``open_source`` with ``opening``: the hub's source factory."""

    def factory(reference: str, decode: bool = True) -> FrameSource:
        return open_source(reference, opening, decode)

    return factory
