"""Frame sources and sinks, without WebRTC."""

from __future__ import annotations

import json
import threading
from fractions import Fraction

import av
import cv2
import numpy as np
import pytest

from sinks import JsonLinesWriter, VideoRecorder
from sources import CameraSource, FileSource, ManualFrames, SourceError, SyntheticSource
from sources.synthetic import decode_stamp


def vp8_round_trip(images: list[np.ndarray]) -> list[np.ndarray]:
    codec = av.CodecContext.create("libvpx", "w")
    codec.width, codec.height = images[0].shape[1], images[0].shape[0]
    codec.pix_fmt, codec.bit_rate = "yuv420p", 500_000
    codec.time_base = Fraction(1, 30)
    packets = []
    for i, image in enumerate(images):
        frame = av.VideoFrame.from_ndarray(image, format="bgr24").reformat(format="yuv420p")
        frame.pts = i
        packets += codec.encode(frame)
    packets += codec.encode(None)
    decoder = av.CodecContext.create("libvpx", "r")
    return [f.to_ndarray(format="bgr24") for p in packets for f in decoder.decode(p)]


def test_synthetic_stamps_survive_video_coding_and_measure_age():
    source = SyntheticSource(320, 240, fps=30, frames=10, realtime=False)
    frames = list(source)
    assert [f.index for f in frames] == list(range(10))
    assert [f.pts for f in frames] == [i * 3000 for i in range(10)]
    decoded = [decode_stamp(image) for image in vp8_round_trip([f.image for f in frames])]
    assert [s.index for s in decoded if s] == list(range(10))
    assert 0 <= decoded[-1].age_ms() < 10_000
    assert decode_stamp(np.zeros((240, 320, 3), np.uint8)) is None  # checksum fails


def test_synthetic_realtime_read_is_woken_by_close():
    source = SyntheticSource(320, 240, fps=0.01)  # the second frame is 100 s away
    assert source.read() is not None
    closer = threading.Timer(0.05, source.close)
    closer.start()
    assert source.read() is None
    closer.join()


def test_manual_frames_are_bounded_and_stamped_in_order():
    frames = ManualFrames(capacity=3)
    image = np.zeros((48, 64, 3), np.uint8)
    for _ in range(5):
        frames.send(image)
    assert frames.dropped == 2
    read = [frames.read() for _ in range(3)]
    assert [f.index for f in read] == [0, 1, 2]
    assert read[0].pts < read[1].pts < read[2].pts
    with pytest.raises(ValueError, match="BGR uint8"):
        frames.send(np.zeros((48, 64), np.uint8))
    frames.close()
    assert frames.read() is None


class FakeCapture:
    """cv2.VideoCapture's interface over a list of images; then a camera failure."""

    def __init__(self, images: list[np.ndarray], opened: bool = True) -> None:
        self.images, self.opened, self.released = list(images), opened, False

    def isOpened(self) -> bool:
        return self.opened

    def read(self):
        return (True, self.images.pop(0)) if self.images else (False, None)

    def get(self, prop: int) -> float:
        return 25.0 if prop == cv2.CAP_PROP_FPS else 0.0

    def set(self, prop: int, value: float) -> bool:
        return True

    def release(self) -> None:
        self.released = True


def test_camera_reports_fps_and_a_failure_and_releases_the_device():
    capture = FakeCapture([np.full((48, 64, 3), i, np.uint8) for i in range(3)])
    camera = CameraSource(0, capture_factory=lambda _: capture)
    assert camera.fps == 25.0
    frames = list(camera)
    assert frames and frames[-1].image[0, 0, 0] == 2  # latest frame wins
    assert camera.error == "camera 0 stopped delivering frames"
    camera.close()
    assert capture.released


def test_a_camera_that_does_not_open_is_a_clear_error():
    with pytest.raises(SourceError, match="cannot open camera 3"):
        CameraSource(3, capture_factory=lambda _: FakeCapture([], opened=False))


def test_file_source_and_recorder_round_trip(tmp_path):
    path = tmp_path / "clip.mp4"
    with VideoRecorder(path, fps=20) as recorder:
        for frame in SyntheticSource(320, 240, fps=20, frames=12, realtime=False):
            recorder.write(frame.image)
    with FileSource(path) as source:
        assert source.fps == pytest.approx(20)
        assert source.frame_count == 12
        stamps = [decode_stamp(f.image) for f in source]
    assert [s.index for s in stamps if s] == list(range(12))


def test_corrupt_file_is_a_clear_error(tmp_path):
    path = tmp_path / "broken.mp4"
    path.write_bytes(b"\x00" * 1000)
    with pytest.raises(SourceError, match="cannot open video file"):
        FileSource(path)


def test_jsonl_writer_writes_one_line_per_record(tmp_path):
    path = tmp_path / "out" / "results.jsonl"
    with JsonLinesWriter(path) as writer:
        writer.write({"frame_id": 1, "data": {"a": [1, 2]}})
        writer.write({"frame_id": 2})
    assert [json.loads(line)["frame_id"] for line in path.read_text().splitlines()] == [1, 2]


def test_a_live_source_listener_may_ask_for_its_stats():
    """Listeners are called once the source's lock is released: a listener that reads
    ``stats()`` (as a pipeline's does) gets them instead of deadlocking the reader."""
    from sources.live import LiveSource
    from tests.support.server import free_port

    source = LiveSource(f"rtsp://127.0.0.1:{free_port()}/nobody", read_timeout=1.0)
    heard: list[tuple[str, str]] = []
    asked = threading.Event()

    def listener(previous: str, new: str, _stats) -> None:
        heard.append((new, source.stats().state))  # takes the lock the change was made under
        asked.set()

    source.add_listener(listener)
    reader = threading.Thread(target=source.read, daemon=True)
    reader.start()
    try:
        assert asked.wait(30), "no state change heard"
        assert heard[0] == ("reconnecting", "reconnecting")
    finally:
        source.close()
        reader.join(30)
    assert not reader.is_alive()
    assert heard[-1][0] == "closed"
