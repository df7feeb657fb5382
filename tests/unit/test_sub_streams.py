"""Sub-streams (``video_configuration.sub_streams``): which requests name one well, and how
a sub-stream's detections and events are put in the main stream's pixels."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import supervision as sv
from pydantic import ValidationError

from streaming.errors import InvalidRequest
from streaming.events import EventRecord
from streaming.pipelines.models import VideoConfiguration, resolve_references
from streaming.pipelines.substreams import ScaledEvents, scale_between, scaled_outputs

MAIN, SUB = "rtsp://127.0.0.1:8554/main", "rtsp://127.0.0.1:8554/sub"


def video(**given) -> VideoConfiguration:
    return VideoConfiguration(type="VideoConfiguration", **given)


def test_a_camera_names_its_sub_stream_by_its_main_url():
    config = video(video_reference=[MAIN, "rtsp://127.0.0.1:8554/other"],
                   sub_streams={MAIN: SUB})  # fmt: skip
    first, second = resolve_references(config.video_reference, False,
                                       sub_streams=config.sub_streams)  # fmt: skip
    assert (first.reference, first.detect, first.decoded) == (MAIN, SUB, SUB)
    assert (second.detect, second.decoded) == (None, "rtsp://127.0.0.1:8554/other")


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"video_reference": MAIN, "sub_streams": {SUB: MAIN}}, "not in video_reference"),
        ({"video_reference": MAIN, "sub_streams": {MAIN: "bad url"}}, "whitespace"),
    ],
)
def test_a_sub_stream_of_nothing_or_no_url_is_refused(given, words):
    with pytest.raises(ValidationError, match=words):
        video(**given)


@pytest.mark.parametrize(
    ("main", "sub", "words"),
    [
        (MAIN, "./sub.mp4", "not a camera URL"),
        ("./main.mp4", SUB, "only a camera URL has a sub-stream"),
    ],
)
def test_only_cameras_have_sub_streams(main, sub, words):
    with pytest.raises(InvalidRequest, match=words):
        resolve_references(main, True, sub_streams={main: sub})


def stream(width: int, height: int):
    """What ``scale_between`` reads of a reader: its picture's size."""
    return SimpleNamespace(size=(width, height))


def test_detections_are_scaled_to_the_main_stream_boxes_masks_and_keypoints():
    mask = np.zeros((1, 360, 640), bool)
    mask[0, 100:200, 100:300] = True
    found = sv.Detections(
        xyxy=np.array([[100.0, 100.0, 300.0, 200.0]]), mask=mask,
        confidence=np.array([0.9]), class_id=np.array([0]),
        data={"class_name": np.array(["person"]), "keypoints_xy": [np.array([[320.0, 180.0]])]},
        metadata={"image_size": (640, 360)},
    )  # fmt: skip
    scale = scale_between(stream(1920, 1080), stream(640, 360))  # type: ignore[arg-type]
    outputs = scaled_outputs({"predictions": found, "crops": [found], "count": 3}, scale)
    scaled = outputs["predictions"]
    assert scaled.xyxy.tolist() == [[300.0, 300.0, 900.0, 600.0]]
    assert scaled.mask.shape == (1, 1080, 1920) and scaled.mask[0, 300:600, 300:900].all()
    assert scaled.data["keypoints_xy"][0].tolist() == [[960.0, 540.0]]
    assert scaled.metadata["image_size"] == (1920, 1080)
    assert outputs["crops"][0].xyxy.tolist() == scaled.xyxy.tolist() and outputs["count"] == 3
    assert found.xyxy.tolist() == [[100.0, 100.0, 300.0, 200.0]]  # the original, untouched
    assert scale_between(stream(640, 360), stream(640, 360)) is None  # type: ignore[arg-type]
    assert scale_between(None, stream(640, 360)) is None  # type: ignore[arg-type]


def test_an_events_box_is_scaled_to_the_main_stream():
    from sources import LiveSource

    class Hub:
        def source_of(self, url: str, decode: bool = True):
            return readers[(url, decode)]

    readers = {}
    for url, decode, size in ((MAIN, False, (1280, 720)), (SUB, True, (640, 360))):
        reader = LiveSource(url, decode=decode)  # never read: only its size is asked
        reader.size = size
        readers[(url, decode)] = reader
    kept: list[EventRecord] = []
    store = SimpleNamespace(record=kept.append)
    events = ScaledEvents(store, Hub(), MAIN, SUB)  # type: ignore[arg-type]
    box = {"xyxy": [10.0, 20.0, 30.0, 40.0], "confidence": 0.5}
    events.record(EventRecord("line_crossing", "p", "0", "counter", payload=box))
    assert kept[0].payload == {"xyxy": [20.0, 40.0, 60.0, 80.0], "confidence": 0.5}
    for reader in readers.values():
        reader.close()
