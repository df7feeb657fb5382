"""Images in inference requests, as inference-sdk sends them and the reference takes them:
``{"type": "base64" | "url" | "numpy", "value": ...}`` (or a bare base64 string), one or a
list. Decoded to BGR uint8, each checked against the server's limits before it is decoded.

- ``base64``: an encoded image (JPEG, PNG, BMP, WebP...), what the SDK sends for a path,
  an array or a PIL image.
- ``url``: fetched by the server, only where ``VISIONSTREAM_ALLOWED_NETWORKS`` allows, without
  following redirects (each hop would need the same check), at most the request limit.
- ``numpy``: the base64 of an ``np.save`` file, ``HxWx3`` (or ``HxW``) uint8 in BGR. The
  reference takes a pickle here; a pickle can run code on load, so it is refused by name.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings
from dataclasses import dataclass, replace
from typing import Any

import cv2
import httpx
import numpy as np
from PIL import Image

from sinks.masking import mask_url
from sinks.pinning import pinned_request

from .config import Settings
from .egress import EgressPolicy
from .errors import InvalidRequest, RequestTooLarge, SourceUnavailable

__all__ = ["ImageLimits", "load_images", "load_stills"]

_URL_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ImageLimits:
    max_images: int
    """Images in one request (a batch); more is a 413."""
    max_pixels: int
    """Width x height of one image, read from its header before it is decoded."""
    max_bytes: int
    """Encoded bytes of one fetched image."""

    @classmethod
    def of(cls, settings: Settings) -> ImageLimits:
        return cls(
            settings.max_images_per_request,
            settings.max_frame_pixels,
            settings.max_infer_request_bytes,
        )


async def load_images(
    value: Any, where: str, limits: ImageLimits, egress: EgressPolicy
) -> list[np.ndarray]:
    """Every image ``value`` holds (one, or a list of them), in order."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise InvalidRequest(f"{where}: no image given")
    if len(items) > limits.max_images:
        raise RequestTooLarge(
            f"{where}: {len(items)} images in one request; this server takes at most "
            f"{limits.max_images} (VISIONSTREAM_MAX_IMAGES_PER_REQUEST)"
        )
    label = (lambda i: f"{where}[{i}]") if isinstance(value, list) else (lambda _: where)
    return [await _load(item, label(i), limits, egress) for i, item in enumerate(items)]


async def _load(item: Any, where: str, limits: ImageLimits, egress: EgressPolicy) -> np.ndarray:
    if isinstance(item, str):
        return _decode(_base64(item, where), where, limits)
    if not isinstance(item, dict) or not isinstance(item.get("value"), str):
        raise InvalidRequest(f'{where}: an image is {{"type": "base64" | "url", "value": "..."}}')
    kind, value = item.get("type", "base64"), item["value"]
    if kind == "base64":
        return _decode(_base64(value, where), where, limits)
    if kind == "url":
        return _decode(await _fetch(value, where, limits, egress), where, limits)
    if kind == "numpy":
        return _array(_base64(value, where), where, limits)
    raise InvalidRequest(
        f"{where}: image type {kind!r} is not supported here (base64, url or numpy)"
    )


def _base64(value: str, where: str) -> bytes:
    if value.startswith("data:"):  # a data URL, as browsers write images
        value = value.partition(",")[2]
    try:
        return base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest(f"{where}: not base64: {exc}") from None


def _decode(data: bytes, where: str, limits: ImageLimits) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            width, height = Image.open(io.BytesIO(data)).size  # the header only
    except (OSError, ValueError, Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise InvalidRequest(f"{where}: not an image this server can decode") from None
    _check_size(width, height, where, limits)
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise InvalidRequest(f"{where}: not an image this server can decode")
    return image


def _array(data: bytes, where: str, limits: ImageLimits) -> np.ndarray:
    if data[:1] == b"\x80":  # pickle's protocol marker
        raise InvalidRequest(
            f"{where}: numpy images are np.save bytes here; pickles are refused (they can "
            "run code when loaded)"
        )
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise InvalidRequest(f"{where}: not an np.save array: {exc}") from None
    if (
        not isinstance(array, np.ndarray)
        or array.dtype != np.uint8
        or not (array.ndim == 2 or (array.ndim == 3 and array.shape[2] == 3))
    ):
        raise InvalidRequest(f"{where}: a numpy image is HxWx3 (BGR) or HxW, uint8")
    _check_size(array.shape[1], array.shape[0], where, limits)
    return array if array.ndim == 3 else cv2.cvtColor(array, cv2.COLOR_GRAY2BGR)


def _check_size(width: int, height: int, where: str, limits: ImageLimits) -> None:
    if width < 1 or height < 1:
        raise InvalidRequest(f"{where}: an empty image")
    if width * height > limits.max_pixels:
        raise RequestTooLarge(
            f"{where}: a {width}x{height} image is larger than this server takes "
            f"({limits.max_pixels} pixels, VISIONSTREAM_MAX_FRAME_PIXELS)"
        )


async def _fetch(url: str, where: str, limits: ImageLimits, egress: EgressPolicy) -> bytes:
    shown = mask_url(url)
    if not url.startswith(("http://", "https://")):
        raise InvalidRequest(f"{where}: an image URL is http(s)://, not {shown}")
    address = await egress.check_url(url, where)
    # The address checked, not the name again (a DNS answer may change in between).
    target, host, extensions = pinned_request(httpx.URL(url), lambda _host, _port: address)
    try:
        async with (
            httpx.AsyncClient(timeout=_URL_TIMEOUT_S, follow_redirects=False) as client,
            client.stream("GET", target, headers=host, extensions=extensions) as response,
        ):
            if response.status_code != 200:
                raise SourceUnavailable(f"{where}: {shown} answered {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limits.max_bytes:
                    raise RequestTooLarge(
                        f"{where}: {shown} is larger than {limits.max_bytes} bytes"
                    )
            return bytes(body)
    except httpx.HTTPError as exc:
        raise SourceUnavailable(f"{where}: cannot fetch {shown}: {type(exc).__name__}") from None


async def load_stills(
    parameters: dict[str, Any], names: list[str], limits: ImageLimits, egress: EgressPolicy
) -> dict[str, Any]:
    """``parameters`` with each of ``names`` (a workflow's image inputs other than the one
    frames go to: a template to find) decoded to one image, as any request image is."""
    out = dict(parameters)
    for name in names:
        value = out.get(name)
        if value is None or isinstance(value, np.ndarray):
            continue
        (out[name],) = await load_images(
            value, f"inputs.{name}", replace(limits, max_images=1), egress
        )
    return out
