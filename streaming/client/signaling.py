"""Signaling: the request that offers a session (inference-sdk's body) and the answer to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from .. import __version__
from ..rtc.release import OUR_USER_AGENT_PREFIX
from .config import StreamConfig
from .errors import SessionStartError
from .sources import StreamSource

__all__ = ["OfferRequest", "offer_request", "post_offer"]


@dataclass(frozen=True)
class OfferRequest:
    """The body to send, and what it implies for the session that follows."""

    body: dict[str, Any]
    send_acks: bool
    """Non-realtime processing was asked for: the server waits for our ACKs."""
    receives_video: bool
    """Frames come back on the video track."""
    video_in_messages: bool
    """Frames come back as images inside the result messages (no video track)."""


def offer_request(
    sdp: str,
    config: StreamConfig,
    source: StreamSource,
    workflow_config: dict[str, Any],
    image_input: str,
    api_key: str | None,
) -> OfferRequest:
    workflow = {
        "type": "WorkflowConfiguration",
        "image_input_name": image_input,
        "workflows_parameters": config.workflow_parameters,
        **workflow_config,
    }
    body: dict[str, Any] = {
        "workflow_configuration": workflow,
        "webrtc_offer": {"type": "offer", "sdp": sdp},
        "webrtc_realtime_processing": config.realtime_processing,
        "stream_output": None if config.stream_output is None else list(config.stream_output),
        "data_output": list(config.data_output),
    }
    if api_key is not None:
        body["api_key"] = api_key
    if config.turn_server:
        body["webrtc_config"] = {"iceServers": [config.turn_server]}
    optional = {
        "declared_fps": config.declared_fps,
        "requested_plan": config.requested_plan,
        "requested_region": config.requested_region,
        "processing_timeout": config.processing_timeout,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    body.update(source.request_fields(config))
    # Decided from the request actually sent: a VideoFileSource asks for non-realtime
    # processing on its own, and the server then waits for our ACKs.
    stream_output = body["stream_output"]
    receives_video = stream_output is None or any(stream_output)
    return OfferRequest(
        body=body,
        send_acks=not body["webrtc_realtime_processing"],
        receives_video=receives_video,
        video_in_messages=bool(config.stream_output) and not receives_video,
    )


async def post_offer(
    url: str, body: dict[str, Any], *, timeout: float, releases_on_marker: bool
) -> dict[str, Any]:
    """The server's SDP answer; ``SessionStartError`` with the server's ``message`` else."""
    try:
        # Says it is ours: our receiver releases frames itself, so the server need not
        # send it hidden frames (rtc/release.py). With aiortc's receiver it does.
        agent = OUR_USER_AGENT_PREFIX if releases_on_marker else "visionstream-stock/"
        headers = {"User-Agent": f"{agent}{__version__}"}
        async with httpx.AsyncClient(timeout=timeout, headers=headers) as http:
            response = await http.post(url, json=body)
    except httpx.HTTPError as exc:
        raise SessionStartError(f"cannot reach {url}: {_unreachable(url, exc)}", url=url) from None
    if response.status_code != 200:
        message = _server_message(response)
        raise SessionStartError(
            f"{url} refused the session (HTTP {response.status_code}): {message}",
            url=url,
            status=response.status_code,
            server_message=message,
        )
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or "sdp" not in answer:
        raise SessionStartError(f"{url} did not answer with SDP", url=url)
    return answer


def _unreachable(url: str, exc: httpx.HTTPError) -> str:
    """Why nothing answered, in words that say what to do (httpx's own are "All connection
    attempts failed" and OpenSSL's "WRONG_VERSION_NUMBER")."""
    reason = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError) and "WRONG_VERSION_NUMBER" in reason:
        plain = "http://" + url.removeprefix("https://")
        return f"it answers in plain HTTP, not TLS: use {plain.rsplit('/', 1)[0]}/..."
    if isinstance(exc, httpx.ConnectError):
        return (
            "nothing answers there. Is the server running? Start one with: visionstream serve"
            f" ({reason})"
        )
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer in time ({type(exc).__name__}): is the server overloaded or far?"
    return reason


def _server_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict):
        message = body.get("message") or body.get("detail")
        if message:
            return str(message)
    return response.text[:500]
