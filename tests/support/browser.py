"""Debian's Chromium driven by Playwright, with a fake camera and loopback-only WebRTC."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# test-infrastructure.md: loopback candidates need --allow-loopback-in-peer-connection, and
# host candidates must be addresses (not mDNS names) for an aiortc peer to reach them.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--use-fake-device-for-media-stream",
    "--allow-loopback-in-peer-connection",
    "--disable-features=WebRtcHideLocalIpsWithMdns",
]


@contextmanager
def chromium(fake_camera: Path | None = None) -> Iterator[Browser]:
    """A headless Chromium; ``fake_camera`` is a y4m clip its camera plays in a loop. Camera
    access is denied unless a context is given ``permissions=["camera"]``."""
    flags = list(FLAGS)
    if fake_camera is not None:
        flags.append(f"--use-file-for-fake-video-capture={fake_camera}")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=flags)
        try:
            yield browser
        finally:
            browser.close()


WIDTHS = {390: 844, 1280: 800, 1920: 1080}
"""Viewports every page is checked at: a phone, a laptop, a desktop."""


def at_widths(page: Page) -> Iterator[int]:
    """Each of ``WIDTHS`` in turn, the page resized to it (and laid out) before the caller
    checks it; the page's own size again afterwards."""
    before = page.viewport_size
    try:
        for width, height in WIDTHS.items():
            page.set_viewport_size({"width": width, "height": height})
            page.evaluate("() => new Promise((done) => requestAnimationFrame(() => done()))")
            yield width
    finally:
        if before is not None:
            page.set_viewport_size(before)


_OVERFLOWING = (Path(__file__).parent / "overflowing.js").read_text()


def overflowing(page: Page) -> list[str]:
    """What the page clips or pushes sideways at its current width (``overflowing.js``)."""
    return list(page.evaluate(_OVERFLOWING))


__all__ = ["CHROMIUM", "WIDTHS", "at_widths", "chromium", "overflowing"]
