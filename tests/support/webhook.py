"""A local webhook endpoint for the pipelines' webhook sink."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["RequestRecorder", "WebhookReceiver"]


class WebhookReceiver:
    """A local webhook endpoint: it holds every request until ``answer()`` (a stalled
    endpoint the pipeline must not wait for), then answers, then is gone."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.requests: list[tuple[str, dict[str, str]]] = []
        """Each request's path with its query, and its headers, in arrival order."""
        self.received = threading.Condition()
        self.answering = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with receiver.received:
                    receiver.requests.append((self.path, dict(self.headers.items())))
                    receiver.bodies.append(body)
                    receiver.received.notify_all()
                receiver.answering.wait(30)  # stalled until the test lets it answer
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._up = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self._thread.start()

    def wait_bodies(self, count: int, timeout: float = 20) -> None:
        with self.received:
            assert self.received.wait_for(lambda: len(self.bodies) >= count, timeout)

    def answer(self) -> None:
        self.answering.set()

    def down(self) -> None:
        """Idempotent: the endpoint stops answering (connections are refused)."""
        self.answering.set()  # a request still held is let go first
        if self._up:
            self._up = False
            self.http.shutdown()
            self.http.server_close()


class RequestRecorder:
    """A local endpoint that answers every request (GET, POST, PUT) at once with 204 and
    keeps its method, path, headers and raw body; a context manager."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.received = threading.Condition()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                with recorder.received:
                    recorder.requests.append(
                        (self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                         body)
                    )  # fmt: skip
                    recorder.received.notify_all()
                self.send_response(204)
                self.end_headers()

            do_GET = do_POST = do_PUT = _record

            def log_message(self, *_: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self._thread.start()

    def wait_requests(self, count: int, timeout: float = 20) -> list:
        with self.received:
            assert self.received.wait_for(lambda: len(self.requests) >= count, timeout)
            return list(self.requests)

    def __enter__(self) -> RequestRecorder:
        return self

    def __exit__(self, *_: object) -> None:
        self.http.shutdown()
        self.http.server_close()
