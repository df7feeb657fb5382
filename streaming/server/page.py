"""``GET /``: the browser page in ``web/``, served as plain files (no build step, no CDN)."""

from __future__ import annotations

from pathlib import Path

from starlette.responses import Response
from starlette.routing import Match, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["PageFiles", "PageMount", "web_root"]

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
    """The browser page's static files, with our security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-cache"  # revalidate (ETag): a new page shows
        return response


class PageMount(Mount):
    """The page's files at ``/``, claiming only their own paths.

    A plain mount at ``/`` matches every path, so an API route asked with the wrong method
    (``OPTIONS /initialise_webrtc_worker``) was answered by the static files (405, ``Allow:
    GET, HEAD``) instead of by the router (405 with the route's own methods), and unknown
    paths were the static files' to answer."""

    def __init__(self, directory: Path) -> None:
        super().__init__("/", app=PageFiles(directory=directory, html=True), name="page")
        self._paths = {"/"} | {f"/{p.name}" for p in directory.iterdir() if p.is_file()}

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope.get("path") not in self._paths:
            return Match.NONE, {}
        return super().matches(scope)
