"""The upload receiver: disk-backed, bounded, strict about its framing."""

from __future__ import annotations

import io
import os

import pytest

from streaming.peer.upload import UploadError, UploadReceiver, UploadStatus
from streaming.protocol.upload import UPLOAD_HEADER, iter_upload_chunks


def chunks(data: bytes, size: int) -> list[bytes]:
    return list(iter_upload_chunks(io.BytesIO(data), len(data), size))


def test_chunks_in_any_nearby_order_make_the_file_and_duplicates_are_ignored(tmp_path):
    data = os.urandom(10_000)
    parts = chunks(data, 1000)
    receiver = UploadReceiver(max_bytes=1 << 20, directory=tmp_path, chunk_size=1000)
    order = [parts[1], parts[0], parts[0], b"\x00", *parts[2:]]
    statuses = [receiver.feed(p) for p in order]
    assert statuses[2] is UploadStatus.DUPLICATE and statuses[3] is UploadStatus.KEEPALIVE
    assert statuses[-1] is UploadStatus.COMPLETE
    assert receiver.path.read_bytes() == data
    receiver.close()
    receiver.close()
    assert not receiver.path.exists()


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([b"\x01\x02\x03"], "shorter than its 8-byte header"),
        ([UPLOAD_HEADER.pack(5, 3) + b"x"], "out of range"),
        ([UPLOAD_HEADER.pack(0, 3) + b"x", UPLOAD_HEADER.pack(1, 9) + b"x"], "changed its chunk"),
        ([UPLOAD_HEADER.pack(0, 4294967295) + b"x"], "exceeds the"),
        ([UPLOAD_HEADER.pack(0, 0)], "declares 0 chunks"),
        # A chunk over the chunk size is refused at once: it also bounds the holding area.
        ([UPLOAD_HEADER.pack(1, 2) + b"x" * 2000], "exceeds the 1000-byte chunk"),
    ],
)
def test_hostile_uploads_are_refused_and_leave_no_file(tmp_path, messages, needle):
    receiver = UploadReceiver(max_bytes=3000, directory=tmp_path, chunk_size=1000)
    with pytest.raises(UploadError, match=needle):
        for message in messages:
            receiver.feed(message)
    assert receiver.failed and not receiver.path.exists()
    with pytest.raises(UploadError, match="already ended"):
        receiver.feed(UPLOAD_HEADER.pack(0, 3) + b"x")
    assert list(tmp_path.iterdir()) == []


def test_a_gap_that_never_fills_is_an_error(tmp_path):
    receiver = UploadReceiver(max_bytes=1 << 20, directory=tmp_path, chunk_size=10)
    with pytest.raises(UploadError, match="chunk 0 is missing"):
        for index in range(1, 40):
            receiver.feed(UPLOAD_HEADER.pack(index, 50) + b"y" * 10)
    assert list(tmp_path.iterdir()) == []
