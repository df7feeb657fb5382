"""An MJPEG-over-HTTP camera on 127.0.0.1 (or another loopback address): multipart/x-mixed-replace
JPEGs of stamped frames; it keeps each request's ``Host`` header."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cv2

from sources import SyntheticSource

BOUNDARY = "frame"


class MJPEGCamera:
    def __init__(
        self,
        width: int = 320,
        height: int = 240,
        fps: int = 20,
        address: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        size = (width, height, fps)
        self.hosts: list[str] = []
        """Each request's ``Host`` header, in order."""
        self.asked = threading.Condition()
        camera = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with camera.asked:
                    camera.hosts.append(self.headers.get("Host", ""))
                    camera.asked.notify_all()
                self.send_response(200)
                self.send_header("Content-Type", f"multipart/x-mixed-replace; boundary={BOUNDARY}")
                self.end_headers()
                source = SyntheticSource(*size[:2], fps=size[2], realtime=True)  # paced
                try:
                    for frame in source:
                        jpeg = cv2.imencode(".jpg", frame.image)[1].tobytes()
                        self.wfile.write(
                            f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\n"
                            f"Content-Length: {len(jpeg)}\r\n\r\n".encode()
                            + jpeg
                            + b"\r\n"
                        )
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    source.close()

            def log_message(self, *_: object) -> None:
                pass

        self.http = ThreadingHTTPServer((address, port), Handler)
        self.http.daemon_threads = True
        self.port = self.http.server_address[1]
        self.url = f"http://{address}:{self.port}/video.mjpg"
        self._thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
