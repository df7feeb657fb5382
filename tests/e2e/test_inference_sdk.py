"""The published inference-sdk client, unmodified, against the real server process."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from inference_sdk import InferenceHTTPClient
from inference_sdk.webrtc import ManualSource, StreamConfig

from tests.conftest import DETECT_SPEC, load_photo

pytestmark = pytest.mark.e2e

FRAMES = 60
FPS = 15
PTS_STEP = 3000  # the SDK's ManualSource stamps frames on a 30 fps, 90 kHz clock


def _border_diff(returned: np.ndarray, original: np.ndarray, p: dict) -> tuple[float, float]:
    """Mean difference on the box outline vs. away from every drawn thing."""
    diff = np.abs(returned.astype(int) - original.astype(int)).sum(axis=2)
    h, w = diff.shape
    x1 = int(max(0, p["x"] - p["width"] / 2))
    x2 = int(min(w - 1, p["x"] + p["width"] / 2))
    y1 = int(max(0, p["y"] - p["height"] / 2))
    y2 = int(min(h - 1, p["y"] + p["height"] / 2))
    outline = np.concatenate(
        [
            diff[y1 : y2 + 1, max(0, x1 - 1) : x1 + 2].ravel(),
            diff[y1 : y2 + 1, max(0, x2 - 1) : x2 + 2].ravel(),
        ]
    )
    return float(outline.mean()), float(np.median(diff))


def test_unmodified_sdk_program_gets_annotated_frames_and_predictions(server, photos):
    images = [load_photo(photos, n) for n in ("person.jpg", "dog.jpg", "horses.jpg")]
    closed_before = server.closed_sessions

    # --- the program from the issue, verbatim in substance ---
    client = InferenceHTTPClient(api_url=server.url, api_key=None)
    source = ManualSource()
    session = client.webrtc.stream(
        source=source,
        workflow=DETECT_SPEC,
        config=StreamConfig(
            stream_output=["annotated"], data_output=["predictions"], realtime_processing=False
        ),
    )
    changed = threading.Condition()
    predictions: dict[int, dict] = {}
    returned: dict[int, np.ndarray] = {}

    @session.on_data("predictions")
    def on_predictions(data, metadata):
        with changed:
            predictions[metadata.pts] = data
            changed.notify_all()

    try:
        # wait() starts the session; nothing can come back before a frame is sent, so it
        # returns at once with TimeoutError and the source is ready to send.
        with pytest.raises(TimeoutError):
            session.wait(timeout=0.01)
        assert server.sessions() == 1

        def consume():
            for frame, metadata in session.video():
                with changed:
                    returned[metadata.pts] = frame
                    changed.notify_all()

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        pacing = threading.Event()  # never set: paces the sender at FPS, waits for nothing
        start = time.monotonic()
        for i in range(FRAMES):
            source.send(images[i % len(images)])
            pacing.wait(max(0.0, start + (i + 1) / FPS - time.monotonic()))

        wanted = int(np.ceil(0.95 * FRAMES))
        with changed:
            complete = changed.wait_for(
                lambda: len(returned) >= wanted and set(returned) <= set(predictions), timeout=60
            )
            assert complete, f"{len(returned)} frames back, {len(predictions)} predictions"
            frames_back = dict(returned)
            preds = dict(predictions)
    finally:
        session.close()

    # Every returned frame has its predictions, paired by exactly the same pts.
    assert set(frames_back) <= set(preds)
    checked_boxes = 0
    for pts, frame in frames_back.items():
        index = round(pts / PTS_STEP)
        original = images[index % len(images)]
        assert frame.shape == original.shape
        data = preds[pts]
        assert data["image"] == {"width": 640, "height": 480}
        assert data["predictions"], f"no detections on frame {index}"
        for p in data["predictions"]:
            assert set(p) >= {
                "x",
                "y",
                "width",
                "height",
                "confidence",
                "class_id",
                "class",
                "detection_id",
                "parent_id",
            }
        best = max(data["predictions"], key=lambda p: p["confidence"])
        outline, background = _border_diff(frame, original, best)
        assert outline > 40 and outline > 4 * background, (index, outline, background)
        checked_boxes += 1
    assert checked_boxes >= 0.95 * FRAMES

    classes = {p["class"] for p in preds[min(frames_back)]["predictions"]}
    assert {"person", "dog", "horse"} <= classes

    server.wait_sessions_closed(closed_before + 1, timeout=5)
    assert server.sessions() == 0
