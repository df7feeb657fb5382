"""Slack's Web API played on loopback, as the real one answers: ``chat.postMessage`` (JSON),
``files.getUploadURLExternal`` (form), the upload URL it hands out, and
``files.completeUploadExternal`` (form, ``files`` a JSON array); ``ok: false`` with Slack's
error codes for a wrong token (``invalid_auth``) or an unknown channel
(``channel_not_found``). Every call is kept, in order."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

__all__ = ["CHANNEL", "TOKEN", "SlackApi", "SlackCall"]

TOKEN = "xoxb-test-token"
CHANNEL = "C0123456789"


@dataclass
class SlackCall:
    method: str
    """``chat.postMessage``, ..., or ``upload`` for the bytes sent to an upload URL."""
    authorization: str | None
    body: Any
    """The JSON or form arguments (a form's values unlisted), or an upload's bytes."""


class SlackApi:
    """A context manager; ``api_url`` is what ``VISIONSTREAM_SLACK_API_URL`` names.
    ``upload_host``: where the upload URLs it hands out point (default: itself)."""

    def __init__(self, upload_host: str | None = None) -> None:
        self.calls: list[SlackCall] = []
        self.changed = threading.Condition()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                method = self.path.rsplit("/", 2)[-2 if self.path.startswith("/upload/") else -1]
                if self.path.startswith("/upload/"):
                    api.record(SlackCall("upload", None, raw))
                    return self.answer(200, b"OK - " + str(len(raw)).encode(), "text/plain")
                if self.headers.get("content-type", "").startswith("application/json"):
                    body = json.loads(raw)
                else:
                    body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                call = SlackCall(method, self.headers.get("authorization"), body)
                api.record(call)
                return self.answer(200, json.dumps(api.reply(call)).encode(), "application/json")

            def answer(self, status: int, content: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, *_: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self.http.server_address[1]
        self.api_url = f"http://127.0.0.1:{port}/api"
        self._uploads = f"http://{upload_host or '127.0.0.1'}:{port}/upload"
        self._thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self._thread.start()

    def record(self, call: SlackCall) -> None:
        with self.changed:
            self.calls.append(call)
            self.changed.notify_all()

    def reply(self, call: SlackCall) -> dict[str, Any]:
        if call.authorization != f"Bearer {TOKEN}":
            return {"ok": False, "error": "invalid_auth"}
        channel = call.body.get("channel") or call.body.get("channel_id")
        if call.method in ("chat.postMessage", "files.completeUploadExternal"):
            if channel != CHANNEL:
                return {"ok": False, "error": "channel_not_found"}
            return {"ok": True, "channel": channel, "ts": f"{len(self.calls)}.000100"}
        if call.method == "files.getUploadURLExternal":
            file_id = f"F{len(self.calls):08d}"
            return {"ok": True, "upload_url": f"{self._uploads}/{file_id}", "file_id": file_id}
        return {"ok": False, "error": "unknown_method"}

    def wait_calls(self, method: str, count: int, timeout: float = 30) -> list[SlackCall]:
        """The first ``count`` calls of ``method``, once they have come."""
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.of(method)) >= count, timeout), self.calls
            return self.of(method)[:count]

    def of(self, method: str) -> list[SlackCall]:
        return [c for c in self.calls if c.method == method]

    def __enter__(self) -> SlackApi:
        return self

    def __exit__(self, *_: object) -> None:
        self.http.shutdown()
        self.http.server_close()
