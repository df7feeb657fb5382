"""The segment recorder on packets of a generated H.264 clip (30 fps, a keyframe each second),
handed over as a camera's reader hands them, with a clock of the test's: segments cut at
keyframes, a reconnect's gap, exports across segments, recording around events, retention,
a crash's open segment recovered, and MJPEG re-encoded."""

from __future__ import annotations

import shutil
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from sinks.recording.export import export
from sinks.recording.recorder import RecordingPolicy, SegmentRecorder
from sinks.recording.segments import NoRecording, segments
from tests.support.media import on_disk_seconds
from tests.support.server import wait_for

FPS = 30
T0 = float(int(time.time()))  # recent: within the recordings' default retention


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """12 s of 320x240 H.264, each frame's shade its index (mod 256)."""
    frames = (np.full((240, 320, 3), i % 256, np.uint8) for i in range(12 * FPS))
    path = tmp_path_factory.mktemp("clip") / "camera.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        stream.options = {"preset": "ultrafast", "g": str(FPS), "bf": "0"}
        for image in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")))
        container.mux(stream.encode())
    return path


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def feed(
    recorder: SegmentRecorder,
    clip: Path,
    clock: Clock,
    seconds: float | None = None,
    lose: bool = True,
):
    """Hands the clip's packets over as a reader would, the clock at each one's own time;
    then the connection is lost (unless not ``lose``: the camera still streaming)."""
    with av.open(str(clip)) as container:
        stream = container.streams.video[0]
        recorder.opened(stream)
        start = clock.now
        for packet in container.demux(stream):
            if packet.dts is None:
                continue
            at = float(packet.dts * stream.time_base)
            if seconds is not None and at >= seconds:
                break
            clock.now = start + at
            recorder.packet(packet)
    if lose:
        clock.now += 1 / FPS
        recorder.lost()


def frames_of(path: Path) -> list[int]:
    """Each decoded frame's shade: which of the clip's frames it is (mod 256)."""
    with av.open(str(path)) as container:
        return [int(f.to_ndarray(format="gray")[120, 160]) for f in container.decode(video=0)]


def duration_of(path: Path) -> float:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stamps = [f.pts for f in container.decode(video=0)]
        return float((max(stamps) - min(stamps)) * stream.time_base) + 1 / FPS


def shade_close(a: int, b: int) -> bool:
    return abs(a - b) <= 3  # H.264 at its defaults is not lossless


def test_a_continuous_recording_is_segments_cut_at_keyframes_losing_no_frame(tmp_path, clip):
    clock = Clock()
    recorder = SegmentRecorder(tmp_path / "cam", RecordingPolicy(segment_s=3), clock)
    feed(recorder, clip, clock)
    recorder.close()
    recorder.close()  # idempotent
    kept = segments(tmp_path / "cam")
    assert len(kept) == 4 and recorder.written == 4
    assert [round(s.start - T0, 3) for s in kept] == [0, 3, 6, 9]  # each at a keyframe
    assert [s.continues for s in kept] == [False, True, True, True]
    shades = [shade for s in kept for shade in frames_of(s.path)]
    assert len(shades) == 12 * FPS
    assert all(shade_close(shade, i % 256) for i, shade in enumerate(shades))
    assert not list((tmp_path / "cam").glob(".*"))  # nothing left hidden


def test_a_reconnect_is_a_gap_between_playable_segments(tmp_path, clip):
    clock = Clock()
    recorder = SegmentRecorder(tmp_path / "cam", RecordingPolicy(segment_s=60), clock)
    feed(recorder, clip, clock, seconds=4)
    clock.now += 5  # the camera was away 5 s
    feed(recorder, clip, clock, seconds=3)
    recorder.close()
    first, second = segments(tmp_path / "cam")
    assert second.start - first.end > 4.9 and not second.continues
    assert len(frames_of(first.path)) == 4 * FPS and len(frames_of(second.path)) == 3 * FPS


def test_an_export_across_segments_plays_the_range_from_its_keyframe(tmp_path, clip):
    clock = Clock()
    recorder = SegmentRecorder(tmp_path / "cam", RecordingPolicy(segment_s=3), clock)
    feed(recorder, clip, clock)
    recorder.close()
    out = tmp_path / "range.mp4"
    exported = export(tmp_path / "cam", T0 + 2.5, T0 + 8.2, out)
    assert exported.segments == 3 and not exported.truncated
    assert exported.start == pytest.approx(T0 + 2.0)  # the keyframe at or before 2.5 s
    shades = frames_of(out)
    assert shade_close(shades[0], 2 * FPS) and shade_close(shades[-1], round(8.2 * FPS) % 256)
    assert duration_of(out) == pytest.approx(8.2 - 2.0, abs=1.0)  # within a GOP
    with pytest.raises(NoRecording):
        export(tmp_path / "cam", T0 + 100, T0 + 110, tmp_path / "none.mp4")


def test_recording_around_events_keeps_pre_and_post_roll_only(tmp_path, clip):
    clock = Clock()
    policy = RecordingPolicy(mode="events", pre_s=2, post_s=2, segment_s=60)
    recorder = SegmentRecorder(tmp_path / "cam", policy, clock)
    with av.open(str(clip)) as container:
        stream = container.streams.video[0]
        recorder.opened(stream)
        for packet in container.demux(stream):
            if packet.dts is None:
                continue
            clock.now = T0 + float(packet.dts * stream.time_base)
            recorder.packet(packet)
            if packet.dts * stream.time_base == Fraction(5):  # an event 5 s in
                recorder.trigger()
    recorder.close()
    (segment,) = segments(tmp_path / "cam")
    shades = frames_of(segment.path)
    # From the keyframe at or before 3 s to the keyframe after 7 s.
    assert segment.start == pytest.approx(T0 + 3.0)
    assert shade_close(shades[0], 3 * FPS) and len(shades) == 5 * FPS


def test_retention_removes_the_oldest_segments_first_and_never_fills_the_disk(tmp_path, clip):
    clock = Clock()
    one = SegmentRecorder(tmp_path / "cam", RecordingPolicy(segment_s=3), clock)
    feed(one, clip, clock)
    one.close()
    sizes = [s.size for s in segments(tmp_path / "cam")]
    # A new recorder on the directory with a budget of two segments: the oldest go.
    budget = RecordingPolicy(segment_s=3, max_bytes=sizes[-1] + sizes[-2])
    two = SegmentRecorder(tmp_path / "cam", budget, clock)
    two.close()
    assert [round(s.start - T0) for s in segments(tmp_path / "cam")] == [6, 9]
    # A disk with less free than the floor: no segment starts (and nothing is removed
    # beyond what is there).
    floor = RecordingPolicy(segment_s=3, min_free_bytes=shutil.disk_usage(tmp_path).total)
    full = SegmentRecorder(tmp_path / "full", floor, clock)
    feed(full, clip, clock)
    full.close()
    assert full.low_space and segments(tmp_path / "full") == []


def test_a_segment_left_open_by_a_crash_is_recovered_up_to_its_last_fragment(tmp_path, clip):
    clock = Clock()
    recorder = SegmentRecorder(tmp_path / "cam", RecordingPolicy(segment_s=60), clock)
    feed(recorder, clip, clock)
    recorder.close()
    (whole,) = segments(tmp_path / "cam")
    # What a killed server leaves: the hidden file, cut off in its last fragments.
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    data = whole.path.read_bytes()
    (crashed / f".{round(T0 * 1000)}.partial.mp4").write_bytes(data[: len(data) * 2 // 3])
    SegmentRecorder(crashed, RecordingPolicy()).close()
    (recovered,) = segments(crashed)
    count = len(frames_of(recovered.path))
    assert 5 * FPS <= count < 12 * FPS
    assert recovered.end - recovered.start == pytest.approx((count - 1) / FPS, abs=1.0)


def test_a_low_rate_cameras_open_segment_is_on_disk_within_a_second_or_so(tmp_path, clip):
    """The clip is a few KiB a second: the muxer's buffer held all of its first 3.3 s, and a
    kill -9 then left a 28-byte file and a 12.8 s gap. Each fragment is written through."""
    clock = Clock()
    directory = tmp_path / "cam"
    recorder = SegmentRecorder(directory, RecordingPolicy(segment_s=60), clock)
    try:
        feed(recorder, clip, clock, seconds=3.3, lose=False)  # still streaming
        wait_for(lambda: len(list(directory.glob(".*.partial.mp4"))) == 1, 30, "a segment")
        (partial,) = directory.glob(".*.partial.mp4")
        wait_for(lambda: on_disk_seconds(partial) >= 2.9, 30, "3 s of it on disk")
        crashed = tmp_path / "crashed"
        crashed.mkdir()
        shutil.copyfile(partial, crashed / partial.name)  # the server killed here
    finally:
        recorder.close()
    SegmentRecorder(crashed, RecordingPolicy()).close()
    (recovered,) = segments(crashed)
    assert recovered.end - recovered.start >= 2.9
    assert len(frames_of(recovered.path)) >= 3 * FPS


def test_a_camera_that_sends_mjpeg_is_recorded_as_h264(tmp_path):
    clock = Clock()
    recorder = SegmentRecorder(tmp_path / "cam", RecordingPolicy(segment_s=60), clock)
    mjpeg = tmp_path / "camera.avi"
    with av.open(str(mjpeg), "w") as container:
        stream = container.add_stream("mjpeg", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuvj420p"
        for i in range(2 * FPS):
            image = av.VideoFrame.from_ndarray(np.full((240, 320, 3), i * 4, np.uint8), "bgr24")
            container.mux(stream.encode(image))
        container.mux(stream.encode())
    feed(recorder, mjpeg, clock)
    recorder.close()
    (segment,) = segments(tmp_path / "cam")
    with av.open(str(segment.path)) as container:
        assert container.streams.video[0].codec_context.name == "h264"
    shades = frames_of(segment.path)
    assert len(shades) == 2 * FPS and shade_close(shades[10], 40)
