"""The local event sink: one JSON line per event, a snapshot and a clip with pre- and
post-roll taken from frames the gated step never ran on, and retention by count and bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from sinks import EventLog, Retention
from streaming.errors import WorkflowCompilationError
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState

FPS = 10


def frame(i: int) -> np.ndarray:
    """Frame ``i``: its number written in the gray level of its top-left block."""
    image = np.zeros((120, 160, 3), np.uint8)
    image[:40, :40] = i * 8  # frames 0..31
    return image


def stamp(i: int) -> datetime:
    return datetime.fromtimestamp(1_800_000_000 + i / FPS, UTC)


def workflow(tmp_path: Path, **sink: object):
    """A rate limiter on the file's clock lets the sink run once a second of video."""
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"},
                   {"type": "WorkflowParameter", "name": "camera"}],
        "steps": [
            {"type": "roboflow_core/rate_limiter@v1", "name": "once_a_second",
             "cooldown_seconds": 1, "depends_on": "$inputs.image",
             "video_reference_image": "$inputs.image", "next_steps": ["$steps.events"]},
            {"type": "visionstream/event_sink@v1", "name": "events",
             "payload": {"camera": "$inputs.camera"}, **sink},
        ],
        "outputs": [{"type": "JsonField", "name": "event", "selector": "$steps.events.event_id"}],
    }  # fmt: skip
    context = BuildContext(None, sink_dir=tmp_path, stream={"pipeline": "p1", "source": "0"})  # type: ignore[arg-type]
    return compile_workflow(parse_spec(spec), context, parameters={"camera": "door"})


def read_clip(path: Path) -> list[int]:
    """Each frame's number, read back from its gray level."""
    with av.open(str(path)) as container:
        return [
            round(float(f.to_ndarray(format="bgr24")[5:35, 5:35].mean()) / 8)
            for f in container.decode(video=0)
        ]


def test_an_event_is_one_line_with_a_snapshot_and_a_clip_around_it(tmp_path):
    log = EventLog(tmp_path, "door", pre_s=0.5, post_s=0.5)
    for i in range(30):
        seconds = stamp(i).timestamp()
        log.observe(frame(i), seconds)
        if i == 10:
            event_id = log.event({"what": "crossing"}, frame(i), seconds)["event_id"]
    log.close()
    log.close()  # idempotent
    (line,) = (tmp_path / "door.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["event_id"] == event_id and record["what"] == "crossing"
    assert record["snapshot"] == f"door/{event_id}.jpg" and record["clip"] == f"door/{event_id}.mp4"
    snapshot = cv2.imread(str(tmp_path / record["snapshot"]))
    assert snapshot.shape == (120, 160, 3)
    numbers = read_clip(tmp_path / record["clip"])
    assert numbers == list(range(5, 16))  # 0.5 s before frame 10 to 0.5 s after, at 10 fps
    assert not [p for p in (tmp_path / "door").iterdir() if p.name.startswith(".")]


def test_closing_early_writes_the_clip_with_the_post_roll_it_has(tmp_path):
    log = EventLog(tmp_path, "early", pre_s=0.2, post_s=10, snapshot=False)
    for i in range(5):
        log.observe(frame(i), stamp(i).timestamp())
    log.event({}, None, stamp(4).timestamp())
    log.observe(frame(5), stamp(5).timestamp())
    log.close()
    record = json.loads((tmp_path / "early.jsonl").read_text())
    assert record["snapshot"] is None
    assert read_clip(tmp_path / record["clip"]) == [2, 3, 4, 5]


def test_retention_keeps_the_newest_events_within_count_and_bytes(tmp_path):
    log = EventLog(tmp_path, "r", pre_s=0, post_s=0, retention=Retention(max_events=2))
    ids = [log.event({"n": n}, frame(n), float(n))["event_id"] for n in range(5)]
    log.close()
    kept = sorted(p.stem for p in (tmp_path / "r").iterdir())
    assert kept == sorted(ids[-2:])
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 5  # the log stays whole
    tiny = EventLog(tmp_path, "t", pre_s=0, post_s=0, retention=Retention(max_bytes=1))
    tiny.event({}, frame(0), 0.0)
    tiny.close()
    assert list((tmp_path / "t").iterdir()) == []


def test_the_gated_sink_fires_when_let_through_with_pre_roll_from_frames_it_skipped(tmp_path):
    compiled = workflow(tmp_path, clip_seconds_before=0.3, clip_seconds_after=0.2)
    results = []
    for i in range(20):
        meta = {"frame_number": i, "frame_timestamp": stamp(i), "fps": FPS,
                "comes_from_video_file": True}  # fmt: skip
        results.append(compiled.run(frame(i), meta, FrameState()))
    compiled.close()
    fired = [i for i, out in enumerate(results) if out["event"] is not None]
    assert fired == [0, 10]
    lines = [json.loads(x) for x in (tmp_path / "p1-0-events.jsonl").read_text().splitlines()]
    assert [r["frame_number"] for r in lines] == [0, 10]
    assert lines[0]["payload"] == {"camera": "door"}
    assert read_clip(tmp_path / lines[1]["clip"]) == [7, 8, 9, 10, 11, 12]


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ({"file": "../etc/passwd"}, "step 'events': file must be a name"),
        ({"file": "{camera}"}, "step 'events': file may use {pipeline} and {source} only"),
        ({"clip_seconds_before": -1}, "step 'events': clip_seconds_before must be a number"),
        ({"max_events": 0}, "step 'events': max_events must be an integer"),
        ({"snapshot": "yes"}, "step 'events': snapshot must be true or false"),
    ],
)
def test_bad_settings_are_refused_naming_the_step_and_field(tmp_path, given, needle):
    with pytest.raises(WorkflowCompilationError) as caught:
        workflow(tmp_path, **given)
    assert needle in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # nothing written for a refused workflow
