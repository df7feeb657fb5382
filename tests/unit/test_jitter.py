"""The video jitter buffer: frames out on their marker packet, in order, never partial."""

from __future__ import annotations

from aiortc import rtcrtpreceiver
from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtp import RtpPacket

from streaming.rtc.jitter import VideoJitterBuffer, install


def packet(seq: int, timestamp: int, marker: bool = False) -> RtpPacket:
    p = RtpPacket(sequence_number=seq % 65536, timestamp=timestamp, marker=int(marker))
    p._data = f"{seq}.".encode()  # what aiortc's receiver sets: the depayloaded bytes
    return p


def frames(buffer, packets):
    out = []
    for p in packets:
        pli, frame = buffer.add(p)
        out.append((pli, None if frame is None else (frame.timestamp, frame.data)))
    return out


def test_a_frame_leaves_with_its_marker_packet_not_with_the_next_frame():
    buffer = VideoJitterBuffer(128)
    got = frames(buffer, [packet(1, 3000), packet(2, 3000), packet(3, 3000, True),
                          packet(4, 6000, True)])  # fmt: skip
    assert got == [(False, None), (False, None), (False, (3000, b"1.2.3.")), (False, (6000, b"4."))]


def test_without_markers_the_next_frame_completes_it_as_before():
    buffer = VideoJitterBuffer(128)
    got = frames(buffer, [packet(10, 100), packet(11, 100), packet(12, 200), packet(13, 300)])
    assert [f for _, f in got] == [None, None, (100, b"10.11."), (200, b"12.")]


def test_a_gap_holds_the_frame_until_the_retransmission_fills_it():
    buffer = VideoJitterBuffer(128)
    got = frames(buffer, [packet(1, 100), packet(3, 100, True), packet(4, 200, True),
                          packet(2, 100)])  # fmt: skip
    assert [f for _, f in got] == [None, None, None, (100, b"1.2.3.")]
    assert frames(buffer, [packet(5, 300, True)])[0][1] == (200, b"4.")  # the next add


def test_late_duplicates_are_ignored_and_a_new_numbering_asks_for_a_keyframe():
    buffer = VideoJitterBuffer(128)
    frames(buffer, [packet(500, 100, True), packet(501, 200, True)])
    assert frames(buffer, [packet(499, 100, True)]) == [(False, None)]
    assert frames(buffer, [packet(100, 900, True)]) == [(True, (900, b"100."))]


def test_sequence_numbers_wrap():
    buffer = VideoJitterBuffer(128)
    got = frames(buffer, [packet(65534, 100), packet(65535, 100), packet(65536, 100, True)])
    assert got[-1][1] == (100, b"65534.65535.65536.")


def test_overflow_drops_whole_old_frames_and_asks_for_a_keyframe():
    buffer = VideoJitterBuffer(8)
    held = frames(buffer, [packet(1, 100), packet(3, 100, True)])  # packet 2 is lost for good
    held += frames(buffer, [packet(seq, seq * 100, True) for seq in range(4, 9)])
    assert all(f is None for _, f in held)  # everything waits behind the gap
    pli, frame = buffer.add(packet(9, 900, True))  # the window overflows
    assert pli and (frame.timestamp, frame.data) == (400, b"4.")  # 1 and 3 went, together
    assert [f for _, f in frames(buffer, [packet(10, 1000, True)])] == [(500, b"5.")]


def test_installed_everywhere_it_builds_ours_for_video_and_leaves_audio_to_aiortc():
    install(everywhere=True)
    install(everywhere=True)  # idempotent
    assert isinstance(rtcrtpreceiver.JitterBuffer(512, is_video=True), VideoJitterBuffer)
    assert isinstance(rtcrtpreceiver.JitterBuffer(16, prefetch=4), JitterBuffer)
