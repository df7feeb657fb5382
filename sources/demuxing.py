"""How FFmpeg opens a live stream (its demuxer and options by scheme: ``schemes``), an HTTP
stream's kind by its content type, and redirects refused with a clear error; FFmpeg's errors
in words with credentials masked."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import av
import httpx
from av.codec.hwaccel import HWAccel

from sinks.masking import mask_credentials, mask_url

from .base import SourceError

__all__ = [
    "HLS",
    "Demuxer",
    "Redirected",
    "by_url",
    "hardware_in_use",
    "http_demuxer",
    "http_options",
    "not_opened",
    "open_container",
    "reason_of",
    "redirect_of",
]

log = logging.getLogger(__name__)

Demuxer = tuple[str | None, dict[str, str]]
"""FFmpeg's format (None: probe) and its options."""


def by_url(url: str) -> Demuxer:
    """A stream whose scheme does not say how it is read: an HLS playlist by its path, else
    FFmpeg's probe (over HTTP, decided when connecting, from the answer's content type)."""
    if urlsplit(url).path.lower().endswith((".m3u8", ".m3u")):
        return HLS
    return None, {}


# Start at the newest segment, not FFmpeg's default of three back: a monitor wants now.
HLS: Demuxer = ("hls", {"live_start_index": "-1"})


class Redirected(SourceError):
    """An HTTP camera answered with a redirect: never followed (the server checked the
    camera's own address against its egress policy, not wherever it points)."""


def _headers(host: str | None) -> dict[str, str]:
    return {"Host": host} if host else {}


def http_demuxer(url: str, timeout: float, host: str | None = None) -> Demuxer | None:
    """An HTTP stream's demuxer and options from its content type: MJPEG, HLS, or FFmpeg's
    probe (None, {}); None when the camera cannot be asked now; ``Redirected`` when it
    points elsewhere. ``host``: the name ``url``'s pinned address stands for."""
    try:
        with httpx.stream(
            "GET", url, timeout=timeout, follow_redirects=False, headers=_headers(host)
        ) as answer:
            _refuse_redirect(answer)
            kind = answer.headers.get("content-type", "").lower()
    except httpx.HTTPError:
        return None  # asked again on the next attempt; FFmpeg will say why this one fails
    if "multipart/x-mixed-replace" in kind:
        return "mpjpeg", {}
    if "mpegurl" in kind:
        return HLS
    return None, {}


def http_options(options: dict[str, str], host: str | None) -> dict[str, str]:
    """FFmpeg's options for an HTTP camera: no redirects followed (it follows them wherever
    they point unless told not to), and ``host`` as the ``Host`` header where the URL holds
    the pinned address (FFmpeg sends a ``Host`` of ours instead of its own)."""
    options = {**options, "max_redirects": "0"}
    return {**options, "headers": f"Host: {host}\r\n"} if host else options


def redirect_of(url: str, timeout: float, host: str | None = None) -> str | None:
    """Why FFmpeg could not open an HTTP camera, when the reason is a redirect (it is told
    to follow none, and then says only 'Input/output error')."""
    try:
        with httpx.stream(
            "GET", url, timeout=timeout, follow_redirects=False, headers=_headers(host)
        ) as answer:
            _refuse_redirect(answer)
    except httpx.HTTPError:
        return None
    except Redirected as exc:
        return str(exc)
    return None


def _refuse_redirect(answer: httpx.Response) -> None:
    if answer.is_redirect:
        target = mask_url(answer.headers.get("location", ""))
        raise Redirected(
            f"it redirects ({answer.status_code}) to {target or 'nowhere'}: redirects are not "
            "followed for cameras; give the URL it redirects to"
        )


def reason_of(exc: Exception, fallback: str) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or fallback
    return mask_credentials(text)


def open_container(
    url: str,
    format: str | None,
    options: dict[str, str],
    read_timeout: float,
    hwaccel: str | None,
    shown: str,
) -> tuple[Any, str | None]:
    """``av.open`` for a live stream, and the hardware decoding in use: ``hwaccel`` (FFmpeg's
    device type) where its device opens, else None, said once in the log (``shown``: the
    URL, masked). Raises FFmpeg's error for the stream's own failure."""

    def opened(accel: HWAccel | None) -> Any:
        return av.open(
            url,
            format=format,
            options=options,
            # Measured: a stalled RTSP read ends only at PyAV's second read timeout (FFmpeg
            # retries once), so half the budget each makes the whole wait read_timeout.
            timeout=(read_timeout, read_timeout / 2),
            hwaccel=accel,
        )

    if hwaccel is None:
        return opened(None), None
    try:
        return opened(HWAccel(hwaccel, allow_software_fallback=True)), hwaccel
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        # The device cannot be opened here (no GPU, no driver): said once, then software.
        container = opened(None)  # the stream's own failure, if it has one, raises here
        log.warning(
            "%s: hardware decoding (%s) is not available here (%s): decoding in software",
            shown,
            hwaccel,
            reason_of(exc, "failed"),
        )
        return container, None


def not_opened(
    exc: Exception, read_timeout: float, relay: str | None, url: str | None, host: str | None
) -> str:
    """Why a stream did not open, in words. ``relay``: the SRT relay's state (FFmpeg saw only
    its loopback side: say the SRT one); ``url``: an HTTP stream's, whose redirect (refused)
    is said if that is what it was."""
    reason = reason_of(exc, "failed")
    if isinstance(exc, av.error.ExitError):  # FFmpeg's words for our open timeout
        reason = f"nothing to read within {read_timeout:g} s"
    if relay is not None:
        return f"{reason} ({relay})"
    if url is not None and (redirect := redirect_of(url, read_timeout, host)):
        return redirect
    return reason


def hardware_in_use(context: Any, hwaccel: str, shown: str) -> str | None:
    """``hwaccel`` if the decoder (``context``, after its first frame) decodes on it, else
    None, said in the log: FFmpeg falls back to software silently where the device type
    exists but no device answers."""
    if context.is_hwaccel:
        return hwaccel
    log.warning(
        "%s: hardware decoding (%s) is not available here (no device took the "
        "stream): decoding in software",
        shown,
        hwaccel,
    )
    return None
