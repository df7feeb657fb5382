"""Signed, expiring tokens that let a player without headers (VLC, an ``<img>``, a TV) watch
one pipeline source's restream: ``?token=...`` in its URLs, never the API key.

A token names the pipeline, the source and when it expires, signed with HMAC-SHA256 by the
server's restream secret (``VISIONSTREAM_RESTREAM_TOKEN_SECRET``, or a random one kept in
``data_dir``, so URLs outlive restarts). It grants watching that source and nothing else.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from .config import Settings
from .errors import Unauthorized

__all__ = ["ViewerTokens"]

_KEY_FILE = "restream-token.key"
_SIGNATURE_BYTES = 16


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class ViewerTokens:
    secret: bytes
    max_ttl_s: int

    @classmethod
    def for_settings(cls, settings: Settings) -> ViewerTokens:
        configured = settings.restream_token_secret
        if configured is not None:
            secret = configured.get_secret_value().encode()
        else:
            secret = _kept_secret(Path(settings.data_dir) / _KEY_FILE)
        return cls(secret, settings.restream_token_ttl_s)

    def issue(self, pipeline_id: str, source_id: int, ttl_s: int | None = None) -> tuple[str, int]:
        """A token for one source and when it expires (Unix seconds); ``ttl_s`` is capped
        at the server's ``restream_token_ttl_s``."""
        expires = int(time.time()) + min(ttl_s or self.max_ttl_s, self.max_ttl_s)
        claims = json.dumps({"p": pipeline_id, "s": source_id, "e": expires}, separators=(",", ":"))
        body = _b64(claims.encode())
        return f"{body}.{_b64(self._sign(body))}", expires

    def check(self, token: str, pipeline_id: str, source_id: int) -> None:
        """Raises 401 (``Unauthorized``) unless ``token`` is this server's, unexpired,
        for this source. The message never repeats the token."""
        body, _, signature = token.partition(".")
        try:
            given = _unb64(signature)
            claims = json.loads(_unb64(body))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise Unauthorized("the restream token is malformed") from None
        if not hmac.compare_digest(given, self._sign(body)):
            raise Unauthorized("the restream token is not this server's")
        if (
            not isinstance(claims, dict)
            or claims.get("p") != pipeline_id
            or claims.get("s") != source_id
        ):
            raise Unauthorized("the restream token is for another source")
        expires = claims.get("e")
        if not isinstance(expires, int) or expires < time.time():
            raise Unauthorized("the restream token has expired: ask for new URLs")

    def _sign(self, body: str) -> bytes:
        return hmac.new(self.secret, body.encode(), hashlib.sha256).digest()[:_SIGNATURE_BYTES]


def _kept_secret(path: Path) -> bytes:
    """The secret in ``path``, made (readable by this user only) the first time."""
    try:
        return bytes.fromhex(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_bytes(32)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(secret.hex())
    os.replace(temporary, path)  # two servers starting at once: the last one's is kept
    return bytes.fromhex(path.read_text().strip())
