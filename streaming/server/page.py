"""``GET /``: the browser page in ``web/``, served as plain files (no build step, no CDN)."""

from __future__ import annotations

from pathlib import Path

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["PageFiles", "web_root"]

# Everything the page loads comes from this server; media may come from the camera or a blob.
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self' blob: mediastream:; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'"
)


def web_root() -> Path | None:
    """The page's files: inside the installed package (a wheel maps ``web/`` to
    ``streaming/web``), else the source checkout's ``web/`` (editable installs, so an edited
    page shows on reload)."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "web", package.parent / "web"):
        if (candidate / "index.html").is_file():
            return candidate
    return None


class PageFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-cache"  # revalidate (ETag): a new page shows
        return response
