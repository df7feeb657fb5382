"""The client's reassembler is bounded whatever the chunk headers say."""

from __future__ import annotations

import pytest

from streaming.client.pairing import PtsPairer
from streaming.protocol.chunking import HEADER, Reassembler, iter_chunks
from streaming.protocol.messages import VideoMetadata


def chunk(message_id: int, index: int, total: int, payload: bytes = b"x" * 100) -> bytes:
    return HEADER.pack(message_id, index, total) + payload


def test_round_trip_out_of_order():
    payload = bytes(range(256)) * 1000
    chunks = list(iter_chunks(7, payload, chunk_size=10_000))
    r = Reassembler(chunk_size=10_000)
    assert all(r.add(c) is None for c in reversed(chunks[1:]))
    assert r.add(chunks[0]) == (7, payload)
    assert r.pending_bytes == 0


def test_a_huge_declared_total_is_refused_before_storing_anything():
    r = Reassembler(max_bytes=1 << 20)
    with pytest.raises(ValueError, match="beyond the"):
        r.add(chunk(1, 0, 4294967295))
    with pytest.raises(ValueError, match="out of range"):
        r.add(chunk(1, 4294967295, 3))
    with pytest.raises(ValueError, match="shorter than its header"):
        r.add(b"\x01\x02")
    assert (r.pending_bytes, r.rejected) == (0, 3)


def test_incomplete_messages_beyond_the_byte_budget_are_dropped_and_counted():
    r = Reassembler(window=1000, max_bytes=10_000, chunk_size=1_000)
    for message_id in range(50):  # each message: 1 of 5 chunks, never completed
        assert r.add(chunk(message_id, 0, 5, b"y" * 1000)) is None
        assert r.pending_bytes <= 10_000
    assert r.dropped == 40


def test_incomplete_messages_older_than_the_window_are_dropped():
    r = Reassembler(window=4)
    assert r.add(chunk(1, 0, 2)) is None  # its second chunk is lost
    for message_id in range(2, 8):
        assert r.add(chunk(message_id, 0, 1))[0] == message_id
    assert (r.dropped, r.pending_bytes) == (1, 0)
    with pytest.raises(ValueError, match="window closed"):
        r.add(chunk(1, 1, 2))


def test_a_message_cannot_change_its_chunk_count():
    r = Reassembler()
    r.add(chunk(3, 0, 3))
    with pytest.raises(ValueError, match="changed its chunk count"):
        r.add(chunk(3, 1, 1000))
    assert r.pending_bytes == 0


def _meta(pts: int) -> VideoMetadata:
    from datetime import datetime

    return VideoMetadata(frame_id=pts, received_at=datetime.now(), pts=pts)


def test_pairer_pairs_within_one_tick_either_order_and_drops_the_orphans():
    p = PtsPairer(tolerance=1, capacity=4)
    assert p.add_frame(3000, "f1") is None
    assert p.add_data(3001, "d1", _meta(3001))[:2] == ("f1", "d1")
    assert p.add_data(6000, "d2", _meta(6000)) is None  # its frame never comes
    assert p.add_data(9000, "d3", _meta(9000)) is None
    assert p.add_frame(8999, "f3")[:2] == ("f3", "d3")
    assert p.unpaired_messages == 1
    assert p.add_frame(12000, "f4") is None
    assert p.add_frame(15000, "f5") is None
    assert p.add_data(15002, "d5", _meta(15002)) is None  # two ticks off: no pair
