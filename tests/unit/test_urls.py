"""Credentials in camera URLs are masked wherever a URL is shown."""

from __future__ import annotations

import pytest

from sources.urls import mask_credentials, mask_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("rtsp://admin:s3cr3t@10.0.0.5:554/live", "rtsp://admin:***@10.0.0.5:554/live"),
        ("rtsp://10.0.0.5/live", "rtsp://10.0.0.5/live"),
        ("rtsp://:s3cr3t@cam/live", "rtsp://***@cam/live"),
        (
            "http://cam/mjpg?user=a&password=s3cr3t&fps=5",
            "http://cam/mjpg?user=a&password=***&fps=5",
        ),
        ("https://cam/video?token=s3cr3t", "https://cam/video?token=***"),
        (
            "srt://enc:9000?streamid=door&passphrase=s3cr3t-s3cr3t",
            "srt://enc:9000?streamid=door&passphrase=***",
        ),
    ],
)
def test_mask_url(url, shown):
    assert mask_url(url) == shown


def test_mask_credentials_in_free_text():
    text = "cannot open rtsp://admin:s3cr3t@cam/live (and http://u:p@x/y): refused"
    assert mask_credentials(text) == (
        "cannot open rtsp://admin:***@cam/live (and http://u:***@x/y): refused"
    )
