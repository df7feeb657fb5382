"""``/workflows`` and sessions that name a workflow instead of sending one."""

from __future__ import annotations

import pytest

from sources import SyntheticSource
from streaming import Client, SessionStartError, StreamConfig
from streaming.client import FrameSourceStream
from streaming.protocol.workflows import object_detection

pytestmark = pytest.mark.e2e


def test_the_library_and_the_blocks_are_listed(server):
    listed = server.get("/workflows").json()
    assert listed["default"] == "local/object-detection"
    workflow, blur, counting, occupancy, privacy = listed["workflows"]
    assert workflow["id"] == "local/object-detection" and workflow["origin"] == "built-in"
    assert blur["id"] == "local/image-blur" and blur["outputs"] == ["output_image"]
    assert workflow["outputs"] == ["predictions", "annotated"]
    assert counting["id"] == "local/people-counting"
    assert counting["outputs"] == ["count_in", "count_out", "predictions", "annotated"]
    # What the page lets a user draw: the line, the zone.
    (line,) = counting["geometry"]
    assert line["name"] == "line" and line["kind"] == "line" and len(line["default"]) == 2
    assert [(g["name"], g["kind"]) for g in occupancy["geometry"]] == [("zone", "polygon")]
    assert workflow["geometry"] == []
    assert occupancy["id"] == "local/zone-occupancy" and privacy["id"] == "local/privacy-blur"

    one = server.get("/workflows/local/object-detection").json()
    assert one["specification"] == object_detection()

    blocks = {b["type"]: b for b in server.get("/workflows/blocks").json()["blocks"]}
    detection = blocks["roboflow_core/roboflow_object_detection_model@v2"]
    assert detection["fields"]["model_id"]["required"] is True
    assert "predictions" in detection["outputs"]
    counter = blocks["roboflow_core/line_counter@v2"]
    assert counter["fields"]["line_segment"]["required"] is True
    assert set(counter["outputs"]) == {"count_in", "count_out", "detections_in", "detections_out"}
    assert "tracked_detections" in blocks["roboflow_core/byte_tracker@v3"]["outputs"]

    missing = server.get("/workflows/local/nope")
    assert missing.status_code == 404  # at its own URL; naming it in a request is a 400
    assert "'local/nope' not found" in missing.json()["message"]
    assert "local/object-detection" in missing.json()["message"]


def test_a_session_names_its_workflow_like_inference_sdk_does(server):
    config = StreamConfig(data_output=["predictions"], realtime_processing=False)
    source = FrameSourceStream(lambda: SyntheticSource(320, 240, fps=20, frames=10))
    client = Client(server.url)
    results = []
    with client.webrtc.stream(
        source, workflow="object-detection", workspace="local", config=config
    ) as session:

        @session.on_data("predictions")
        def collect(predictions, metadata):
            results.append(predictions)

        session.wait(timeout=60)
    assert len(results) >= 9 and all("predictions" in r for r in results)

    unknown = client.webrtc.stream(source, workflow="nope", workspace="local", config=config)
    with pytest.raises(SessionStartError, match="'local/nope' not found"):
        unknown.start()


def test_the_listing_needs_the_key_when_one_is_set(guarded_server):
    assert guarded_server.get("/workflows").status_code == 401
    assert guarded_server.get("/healthz").status_code == 200


def test_blocks_are_described_from_their_declarations(server):
    described = server.get("/workflows/blocks/describe").json()
    blocks = {b["manifest_type_identifier"]: b for b in described["blocks"]}
    v3 = blocks["roboflow_core/roboflow_object_detection_model@v3"]["fields"]
    assert v3["confidence_mode"]["choices"] == ["best", "default", "custom"]
    assert v3["iou_threshold"] == {"type": "number", "takes": "literal or parameter",
                                   "kinds": ["*"], "required": False, "default": 0.3,
                                   "minimum": 0.0, "maximum": 1.0}  # fmt: skip
    assert v3["images"]["takes"] == "selector" and v3["images"]["kinds"] == ["image"]
    outputs = blocks["roboflow_core/line_counter@v2"]["outputs_manifest"]
    assert {"name": "count_in", "kind": ["integer"]} in outputs
    language = described["universal_query_language_description"]
    assert {"operation_type": "SortDetections"} in language["operations_description"]
    assert {"operator_type": "(Detection) in zone", "operands_number": 2} in language[
        "operators_descriptions"
    ]
    assert server.post("/workflows/blocks/describe", json={}).json() == described
