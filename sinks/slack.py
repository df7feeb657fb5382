"""Messages to Slack's Web API, off the caller's thread: ``chat.postMessage`` for text, and
for files Slack's upload flow (``files.getUploadURLExternal``, the bytes to the URL it gives,
``files.completeUploadExternal`` with the text as the files' comment), as ``slack_sdk``'s
``files_upload_v2`` does.

Every connection, the API's and the upload URL Slack answers with, goes to the address a
``Pin`` checked (the server's egress policy): an answer can never aim the server elsewhere.
The token travels only in the ``Authorization`` header and never in a log or a stat; an
error is Slack's own code (``channel_not_found``, ``invalid_auth``) or the HTTP status.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from .pinning import Pin, pinned_request
from .worker import QueueWorker

__all__ = ["SlackMessage", "SlackSender", "SlackStats"]

log = logging.getLogger(__name__)


class SlackError(Exception):
    """Slack said no (``ok: false``) or did not answer as its API does."""


@dataclass(frozen=True)
class SlackMessage:
    token: str = field(repr=False)
    channel: str
    text: str
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class SlackStats:
    sent: int = 0
    failed: int = 0
    dropped: int = 0
    last_error: str | None = None


class SlackSender:
    """Sends each message from a thread of its own, through a bounded queue (the oldest
    dropped and counted when it is full); one attempt each, its failure counted."""

    def __init__(
        self, api_url: str, *, pin: Pin | None, timeout_s: float = 10.0, queue_size: int = 64
    ) -> None:
        self._api = api_url.rstrip("/")
        self._pin = pin
        self.stats = SlackStats()
        self._http = httpx.Client(timeout=timeout_s, follow_redirects=False)
        self._worker: QueueWorker[SlackMessage] = QueueWorker(
            "slack",
            self._deliver,
            capacity=queue_size,
            drop_oldest=True,
            on_drop=self._dropped,
            lazy=True,
        )

    def send(self, message: SlackMessage) -> bool:
        """Queued (False: the sender is closed)."""
        return self._worker.put(message)

    def pending(self) -> int:
        return self._worker.pending()

    def _dropped(self, message: SlackMessage) -> None:
        self.stats.dropped += 1

    def _deliver(self, message: SlackMessage) -> None:
        try:
            if message.files:
                self._upload(message)
            else:
                self._call(
                    "chat.postMessage",
                    message.token,
                    json={"channel": message.channel, "text": message.text},
                )
        except (httpx.HTTPError, OSError, SlackError, ValueError) as exc:
            self.stats.failed += 1
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("slack: a message to %s was not sent: %s", message.channel, exc)
            return
        self.stats.sent += 1

    def _upload(self, message: SlackMessage) -> None:
        uploaded = []
        for name, data in message.files.items():
            ticket = self._call(
                "files.getUploadURLExternal",
                message.token,
                data={"filename": name, "length": str(len(data))},
            )
            url, file_id = ticket.get("upload_url"), ticket.get("file_id")
            if not isinstance(url, str) or not isinstance(file_id, str):
                raise SlackError("files.getUploadURLExternal gave no upload_url and file_id")
            response = self._post(url, content=data)
            if not response.is_success:
                raise SlackError(f"the upload of {name!r} was answered HTTP {response.status_code}")
            uploaded.append({"id": file_id, "title": name})
        # Form-encoded with ``files`` as a JSON array, as slack_sdk sends it.
        self._call(
            "files.completeUploadExternal",
            message.token,
            data={
                "files": json.dumps(uploaded),
                "channel_id": message.channel,
                "initial_comment": message.text,
            },
        )

    def _call(self, method: str, token: str, **body: Any) -> dict[str, Any]:
        response = self._post(
            f"{self._api}/{method}", headers={"Authorization": f"Bearer {token}"}, **body
        )
        if response.status_code == 429:
            raise SlackError(
                f"{method}: rate limited (Retry-After {response.headers.get('retry-after')})"
            )
        try:
            answer = response.json()
        except ValueError:
            raise SlackError(f"{method}: HTTP {response.status_code}, not JSON") from None
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            error = answer.get("error") if isinstance(answer, dict) else None
            raise SlackError(f"{method}: {error or f'HTTP {response.status_code}'}")
        return answer

    def _post(self, url: str, headers: dict[str, str] | None = None, **body: Any) -> httpx.Response:
        target = httpx.URL(url)
        if target.scheme not in ("http", "https"):
            raise SlackError(f"not an http(s) URL: {target.scheme}://...")
        sent_headers = dict(headers or {})
        extensions: dict[str, Any] = {}
        if self._pin is not None:  # resolved and checked for this request
            target, host, extensions = pinned_request(target, self._pin)
            sent_headers.update(host)
        return self._http.post(target, headers=sent_headers, extensions=extensions, **body)

    def close(self) -> None:
        """Idempotent: what is queued is still sent (within 10 s), then the client closes."""
        if self._worker.stopping.is_set():
            return
        self._worker.close(timeout_s=10)
        self._http.close()
