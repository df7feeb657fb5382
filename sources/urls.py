"""Camera URLs as they may be shown: credentials never reach logs, errors or API responses."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["PUBLISHED_SCHEME", "has_scheme_and_host", "mask_credentials", "mask_url"]

PUBLISHED_SCHEME = "whip://"
"""URLs of streams published to this server (a WHIP publisher's ``whip://<resource id>``):
the hub opens them as it opens cameras; nobody else may name one."""

_MASK = "***"
# user:password@ inside any scheme://... (also inside longer text such as FFmpeg messages).
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")


def has_scheme_and_host(url: str, schemes: tuple[str, ...]) -> bool:
    """``url`` is ``scheme://host...`` with one of ``schemes`` (what a camera URL must be)."""
    try:
        parts = urlsplit(url)
        return parts.scheme.lower() in schemes and bool(parts.hostname)
    except ValueError:  # e.g. a port that is not a number
        return False


def mask_url(url: str) -> str:
    """``rtsp://admin:secret@cam/stream`` -> ``rtsp://admin:***@cam/stream``; a password in
    the query (``?password=...``, SRT's ``?passphrase=...``) is masked too."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return mask_credentials(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:{_MASK}@{host}" if user else f"{_MASK}@{host}"
    query = re.sub(
        r"(?i)((?:^|&)(?:password|passwd|pwd|pass|passphrase|token|key|secret|auth|api_key|apikey|access_token)=)[^&]*",
        rf"\1{_MASK}",
        parts.query,
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_credentials(text: str) -> str:
    """Every ``scheme://user:password@`` in free text, with the password masked."""

    def masked(match: re.Match[str]) -> str:
        user = match["userinfo"].partition(":")[0]
        return f"{match['scheme']}{user}:{_MASK}@" if user else f"{match['scheme']}{_MASK}@"

    return _USERINFO.sub(masked, text)
