"""SourceFrame: a decoded frame's BGR pixels are made on first use, once, however many
threads ask; its grey copy comes from the luma plane without them."""

from __future__ import annotations

import threading
from fractions import Fraction

import av
import numpy as np
import pytest

from sources import SourceFrame
from sources.base import Converter


def decoded(image: np.ndarray, pixel_format: str = "yuv420p") -> av.VideoFrame:
    return av.VideoFrame.from_ndarray(image, format="bgr24").reformat(format=pixel_format)


def gradient(height: int = 120, width: int = 160) -> np.ndarray:
    ramp = np.linspace(0, 255, width, dtype=np.uint8)
    return np.repeat(np.repeat(ramp[None, :, None], height, axis=0), 3, axis=2)


def test_pixels_are_made_once_on_first_use_by_whichever_thread_asks():
    frame = SourceFrame(None, 0, Fraction(1, 90000), 0, decoded=decoded(gradient()))
    assert not frame.converted
    seen: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: seen.append(frame.image)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert frame.converted and len({id(image) for image in seen}) == 1
    assert seen[0].shape == (120, 160, 3) and abs(int(seen[0][60, 150, 1]) - 239) <= 4


@pytest.mark.parametrize("pixel_format", ["yuv420p", "yuvj420p", "nv12", "yuv444p", "rgb24"])
def test_the_grey_copy_needs_no_conversion_and_matches_the_pixels_one(pixel_format):
    """From the luma plane (video range stretched to 0-255, as a grey made from the BGR
    pixels is: a motion check sees no jump between the two), or through swscale for a
    format without one."""
    image = gradient()
    lazy = SourceFrame(None, 0, Fraction(1, 90000), 0, decoded=decoded(image, pixel_format))
    eager = SourceFrame(image, 0, Fraction(1, 90000), 0)
    small = lazy.grey(80)
    assert not lazy.converted and small.shape == (60, 80)
    assert np.abs(small.astype(int) - eager.grey(80).astype(int)).max() <= 6
    assert lazy.grey(1000).shape == (120, 160)  # never wider than the frame


def test_a_sources_converter_gives_pyavs_own_pixels_to_many_threads():
    """One swscale context for all of a camera's frames, whichever threads convert them."""
    converter = Converter()
    images = [np.roll(gradient(360, 640), 7 * i, axis=1) for i in range(16)]
    frames = [SourceFrame(None, i, Fraction(1, 90000), i, decoded=decoded(image),
                          converter=converter) for i, image in enumerate(images)]  # fmt: skip
    threads = [threading.Thread(target=lambda f=f: f.image) for f in frames]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for frame, image in zip(frames, images, strict=True):
        assert np.array_equal(frame.image, decoded(image).to_ndarray(format="bgr24"))


def test_a_turned_frame_is_turned_when_converted_and_encoded_from_its_pixels():
    image = gradient(120, 160)
    frame = SourceFrame(None, 0, Fraction(1, 90000), 0, decoded=decoded(image), rotation=90)
    assert frame.grey(160).shape == (160, 120)  # upright, as the pixels will be
    assert frame.image.shape == (160, 120, 3)
    video = frame.video_frame()
    assert (video.width, video.height) == (120, 160)
    plain = decoded(image)
    assert SourceFrame(None, 0, Fraction(1, 90000), 0, decoded=plain).video_frame() is plain


def test_a_shared_frame_is_read_from_many_threads_at_once():
    """A hub's frame goes to every consumer of the camera: their motion checks and
    conversions on it take turns in PyAV's one scaler of the frame. (Two pipelines on one
    camera hung when they did not: tests/e2e/test_analytics.py finds that; this does not
    reproduce it, it checks that many readers at once all get through.)"""
    frames = [SourceFrame(None, i, Fraction(1, 90000), i, decoded=decoded(gradient(720, 1280)))
              for i in range(20)]  # fmt: skip
    done: list[int] = []

    def read(turn: int) -> None:
        for frame in frames:
            _ = frame.grey(160) if turn % 2 else frame.image
        done.append(turn)

    threads = [threading.Thread(target=read, args=(turn,), daemon=True) for turn in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(done) == list(range(8))


def test_a_frame_and_its_workflow_image_pickle_as_their_pixels():
    """A Ray pipeline actor hands its latest result to the replica a viewer watches from:
    the frame (and an image a step has not read yet) travel as pixels."""
    import pickle

    from streaming.workflows.blocks.images import WorkflowImage

    image = gradient()
    frame = SourceFrame(None, 7, Fraction(1, 90000), 3, decoded=decoded(image))
    lazy = WorkflowImage(lambda: frame.image, "image")
    copied_frame, copied_image = pickle.loads(pickle.dumps((frame, lazy)))
    assert (copied_frame.pts, copied_frame.time_base, copied_frame.index) == (7, frame.time_base, 3)
    assert np.array_equal(copied_frame.image, frame.image)
    assert copied_image.parent_id == "image" and np.array_equal(copied_image.numpy, frame.image)
