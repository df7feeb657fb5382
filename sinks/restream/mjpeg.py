"""A source's restream as MJPEG (``multipart/x-mixed-replace``: Home Assistant's MJPEG
camera, browsers' ``<img>``, the simplest clients) and as one snapshot JPEG."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from .restream import Subscription

__all__ = ["BOUNDARY", "CONTENT_TYPE", "mjpeg_parts", "snapshot"]

BOUNDARY = "visionstream-frame"
CONTENT_TYPE = f"multipart/x-mixed-replace; boundary={BOUNDARY}"


async def mjpeg_parts(subscription: Subscription) -> AsyncIterator[bytes]:
    """Each newest JPEG as one part, until the subscription closes (the player left, fell
    behind, or the source ended)."""
    try:
        while (picture := await subscription.next()) is not None:
            head = (
                f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\n"
                f"Content-Length: {len(picture)}\r\n\r\n"
            ).encode()
            yield head + picture + b"\r\n"
    finally:
        subscription.close("the player left")


async def snapshot(subscription: Subscription, wait_s: float) -> bytes | None:
    """The next picture of a JPEG subscription (closed after); None if none came within
    ``wait_s``."""
    try:
        async with asyncio.timeout(wait_s):
            picture = await subscription.next()
        return picture if isinstance(picture, bytes) else None
    except TimeoutError:
        return None
    finally:
        subscription.close("snapshot taken")
