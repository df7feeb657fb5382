"""The one table of source kinds: what each reference names and what the hub may open."""

from __future__ import annotations

import pytest

from sources import FrameSource, SourceError
from sources.kinds import (
    CAMERA,
    DEVICE,
    FILE,
    KINDS,
    PUBLISHED,
    Opening,
    kind_of,
    open_source,
)


@pytest.mark.parametrize(
    ("reference", "kind"),
    [
        ("rtsp://127.0.0.1/cam", CAMERA),
        ("RTMP://127.0.0.1/live/key", CAMERA),
        ("srt://127.0.0.1:9000", CAMERA),
        ("whip://0123", PUBLISHED),
        (0, DEVICE),
        ("0", DEVICE),
        ("/dev/video2", DEVICE),
        ("/videos/a.mp4", FILE),
        ("file:///videos/a.mp4", FILE),
        ("rtp://127.0.0.1:5000", None),
        ("gopher://127.0.0.1/", None),
    ],
)
def test_each_reference_names_one_kind(reference: str | int, kind: object) -> None:
    assert kind_of(reference) is kind


def test_no_scheme_belongs_to_two_kinds() -> None:
    schemes = [scheme for kind in KINDS for scheme in kind.schemes]
    assert len(schemes) == len(set(schemes))


def test_the_hub_opens_no_file_and_no_published_stream_without_publishers() -> None:
    with pytest.raises(SourceError, match="not a source the hub opens"):
        open_source("/videos/a.mp4", Opening())
    with pytest.raises(SourceError, match="takes no published streams"):
        open_source("whip://0123", Opening())


def test_a_published_stream_is_opened_by_the_server_s_publishers() -> None:
    opened: list[str] = []

    def published(url: str) -> FrameSource:
        opened.append(url)
        raise SourceError(f"{url} is not a live WHIP resource")

    with pytest.raises(SourceError, match="not a live WHIP resource"):
        open_source("whip://0123", Opening(published=published))
    assert opened == ["whip://0123"]
