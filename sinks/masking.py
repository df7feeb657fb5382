"""Camera URLs as they may be shown: credentials never reach logs, errors or API responses."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["mask_credentials", "mask_url"]

_MASK = "***"
# Schemes whose path ends in a stream key (``rtmp://host/app/KEY``): a publishing secret.
_KEYED_PATH_SCHEMES = frozenset({"rtmp", "rtmps", "rtmpt", "rtmpe", "rtmpte", "rtmpts"})
# user:password@ inside any scheme://... (also inside longer text such as FFmpeg messages).
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")


def mask_url(url: str) -> str:
    """A URL as it may be shown: ``rtmp://admin:secret@cam/live/KEY?sig=S`` ->
    ``rtmp://***@cam/live/***?sig=***``. The user and password, every query value (tokens
    and signatures go by any name) and stream keys in paths (an RTMP path's last segment
    after the application, any SRT path) are masked; scheme, host, port and query names stay."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return mask_credentials(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{_MASK}@{netloc.rpartition('@')[2]}"
    query = re.sub(r"=[^&]*", f"={_MASK}", parts.query)
    path = parts.path
    scheme = parts.scheme.lower()
    if scheme in _KEYED_PATH_SCHEMES:
        application, _, key = path.strip("/").rpartition("/")
        if application and key:
            path = f"/{application}/{_MASK}"
    elif scheme == "srt" and path.strip(
        "/"
    ):  # SRT keeps its stream id in the query; a path is a key too
        path = f"/{_MASK}"
    return urlunsplit((parts.scheme, netloc, path, query, parts.fragment))


def mask_credentials(text: str) -> str:
    """Every ``scheme://user:password@`` in free text (FFmpeg's messages), user and
    password masked."""
    return _USERINFO.sub(lambda match: f"{match['scheme']}{_MASK}@", text)
