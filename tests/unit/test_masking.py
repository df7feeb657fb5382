"""Credentials in camera URLs are masked wherever a URL is shown."""

from __future__ import annotations

import pytest

from sinks.masking import mask_credentials, mask_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("rtsp://admin:s3cr3t@10.0.0.5:554/live", "rtsp://***@10.0.0.5:554/live"),
        ("rtsp://10.0.0.5/live", "rtsp://10.0.0.5/live"),
        ("rtsp://:s3cr3t@cam/live", "rtsp://***@cam/live"),
        (
            "http://cam/mjpg?user=a&password=s3cr3t&fps=5",
            "http://cam/mjpg?user=***&password=***&fps=***",
        ),
        ("https://cam/video?token=s3cr3t", "https://cam/video?token=***"),
        (
            "srt://enc:9000?streamid=door&passphrase=s3cr3t-s3cr3t",
            "srt://enc:9000?streamid=***&passphrase=***",
        ),
        # The attacker's report: user, stream key and every query value were shown.
        (
            "rtmp://admin:hunter2@cam/live/STREAMKEY-abc123?sig=SIGSECRET&token=tok",
            "rtmp://***@cam/live/***?sig=***&token=***",
        ),
        ("rtmp://cam:1935/live", "rtmp://cam:1935/live"),
        ("srt://enc:9000/s3cr3t", "srt://enc:9000/***"),
        ("rtsp://u@cam/live", "rtsp://***@cam/live"),
    ],
)
def test_mask_url(url, shown):
    assert mask_url(url) == shown


def test_mask_credentials_in_free_text():
    text = "cannot open rtsp://admin:s3cr3t@cam/live (and http://u:p@x/y): refused"
    assert mask_credentials(text) == (
        "cannot open rtsp://***@cam/live (and http://***@x/y): refused"
    )
