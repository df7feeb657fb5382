"""An authenticating proxy in front of the server, as operators run one: Debian's nginx with
``auth_request`` asking a small sign-in service (HTTP Basic, one user per role), passing
the user and their groups on as ``X-Forwarded-User`` / ``X-Forwarded-Groups`` (whatever a
client sent under those names replaced), and connecting to the server from 127.0.0.2, the
address the server is told is its proxy."""

from __future__ import annotations

import base64
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .server import LoggedProcess, free_port, wait_for
from .streams import NGINX, _accepts

__all__ = ["PROXY_ADDRESS", "USERS", "AuthProxy"]

PROXY_ADDRESS = "127.0.0.2"
USERS = {
    "alice": ("alice-pw", "guards"),
    "oscar": ("oscar-pw", "staff,ops"),
    "ada": ("ada-pw", "admins"),
    "nina": ("nina-pw", "visitors"),
}
"""user -> (password, groups): a viewer, an operator, an admin, and one in no mapped group."""


class _SignIn:
    """What nginx's ``auth_request`` asks: 200 with the user and groups, or 401."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                scheme, _, encoded = self.headers.get("Authorization", "").partition(" ")
                user, _, password = base64.b64decode(encoded or "").decode().partition(":")
                known = USERS.get(user)
                if scheme != "Basic" or known is None or known[0] != password:
                    self.send_response(401)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("X-User", user)
                self.send_header("X-Groups", known[1])
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


class AuthProxy:
    """nginx on a free loopback port in front of ``upstream`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, directory: Path, upstream: str) -> None:
        self._sign_in = _SignIn()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        temp = "".join(
            f"{kind}_temp_path {directory}/{kind};\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        config = directory / "nginx.conf"
        config.write_text(
            "daemon off;\nmaster_process off;\n"
            f"pid {directory}/nginx.pid;\nerror_log stderr warn;\n"
            "events { worker_connections 64; }\n"
            f"http {{\n access_log off;\n{temp}"
            f" server {{\n  listen 127.0.0.1:{self.port};\n"
            "  location = /_auth {\n   internal;\n"
            f"   proxy_pass http://127.0.0.1:{self._sign_in.port}/check;\n"
            '   proxy_pass_request_body off;\n   proxy_set_header Content-Length "";\n'
            "  }\n"
            "  location / {\n   auth_request /_auth;\n"
            "   auth_request_set $user $upstream_http_x_user;\n"
            "   auth_request_set $groups $upstream_http_x_groups;\n"
            "   proxy_set_header X-Forwarded-User $user;\n"
            "   proxy_set_header X-Forwarded-Groups $groups;\n"
            '   proxy_set_header Authorization "";\n'
            f"   proxy_bind {PROXY_ADDRESS};\n   proxy_pass {upstream};\n"
            "  }\n }\n}\n"
        )
        self._nginx = LoggedProcess(
            [NGINX, "-p", str(directory), "-c", str(config), "-e", "stderr"]
        )
        try:  # with no master process nginx says nothing once it listens: ask the port
            wait_for(lambda: _accepts(self.port), 30, f"nginx listening on {self.port}")
        except TimeoutError:
            self.close()
            raise

    def close(self) -> None:
        self._nginx.stop()
        self._sign_in.close()
