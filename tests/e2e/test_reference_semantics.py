"""The reference's engine semantics, with definitions in its shape, over the real server:
``POST /workflows/validate``, ``POST /workflows/run`` and the unmodified inference-sdk's
``run_workflow``, the reference's refusals included.

- A definition validates without its inputs' values; a run names the one it lacks.
- ``WorkflowBatchInput``: one value per image, predictions of another run fed back in.
- ``dimension_collapse`` of per-image data gathers the run's images; it nests across inner
  workflows either way.
- A filter hands on the kind it is given (segmentation on to ``dynamic_zone``).
- A gate deciding on each slice governs a sink of constants, once per slice let through.
- ``slack_notification@v1`` through Slack's API played on loopback.

The models are constant ONNX graphs (a dog and a cat at known places on a 64 px image), so
every count asserted here is known before the run."""

from __future__ import annotations

import base64
import copy

import cv2
import numpy as np
import pytest
from inference_sdk import InferenceHTTPClient

from sources import SyntheticSource
from streaming import Client, SessionStartError, StreamConfig
from streaming.client import FrameSourceStream
from tests.support.onnx_models import SEG_PROTOS, SEG_ROWS, YOLO_ROWS, model_directory
from tests.support.server import running_server
from tests.support.slack import CHANNEL, TOKEN, SlackApi

pytestmark = pytest.mark.e2e


def step(kind: str, name: str, **fields: object) -> dict:
    return {"type": f"roboflow_core/{kind}", "name": name, **fields}


def output(name: str, selector: str) -> dict:
    return {"type": "JsonField", "name": name, "selector": selector}


def definition(inputs: list[dict], steps: list[dict], outputs: list[dict]) -> dict:
    return {"version": "1.0", "inputs": inputs, "steps": steps, "outputs": outputs}


IMAGE = {"type": "WorkflowImage", "name": "image"}
DETECT = step("roboflow_object_detection_model@v2", "det", images="$inputs.image", model_id="boxes")


@pytest.fixture(scope="module")
def slack():
    with SlackApi() as api:
        yield api


@pytest.fixture(scope="module")
def server(tmp_path_factory, slack):
    models = tmp_path_factory.mktemp("reference-semantics-models")
    model_directory(models, "boxes", [("output", YOLO_ROWS)], decoder="yolov3")
    model_directory(
        models,
        "seg",
        [("output0", SEG_ROWS.T.copy()), ("output1", SEG_PROTOS)],
        decoder="yolov8-seg",
    )
    with running_server(
        models_dir=str(models), default_model="boxes", slack_api_url=slack.api_url
    ) as process:
        yield process


def picture(shade: int = 100) -> np.ndarray:
    return np.full((64, 64, 3), shade, np.uint8)


def encoded(image: np.ndarray) -> dict:
    return {"type": "base64", "value": base64.b64encode(cv2.imencode(".png", image)[1]).decode()}


def run(server, spec: dict, **inputs: object):
    return server.post("/workflows/run", json={"specification": spec, "inputs": inputs})


def sdk(server) -> InferenceHTTPClient:
    return InferenceHTTPClient(api_url=server.url, api_key=None)


def test_a_definition_validates_without_its_values_and_a_run_names_the_one_it_lacks(server):
    spec = definition(
        [
            IMAGE,
            {"type": "WorkflowImage", "name": "template"},
            {"type": "WorkflowParameter", "name": "model"},
            {"type": "WorkflowParameter", "name": "confidence"},
        ],
        [
            dict(DETECT, model_id="$inputs.model", confidence="$inputs.confidence"),
            step(
                "template_matching@v1", "find", image="$inputs.image", template="$inputs.template"
            ),
        ],
        [
            output("boxes", "$steps.det.predictions"),
            output("found", "$steps.find.number_of_matches"),
        ],
    )
    checked = server.post("/workflows/validate", json=spec)
    assert checked.status_code == 200 and checked.json() == {"status": "ok"}, checked.text
    described = server.post("/workflows/describe_interface", json={"specification": spec})
    assert described.status_code == 200, described.text
    assert set(described.json()["inputs"]) == {"image", "template", "model", "confidence"}
    # Given: the confidence left out takes the block's own default, as the reference's None.
    (out,) = sdk(server).run_workflow(
        specification=spec,
        images={"image": picture(), "template": picture()[10:20, 10:20]},
        parameters={"model": "boxes"},
    )
    assert sorted(p["class"] for p in out["boxes"]["predictions"]) == ["cat", "dog"]
    # Not given: the reference's words, naming the input and who needed it.
    lacking = run(server, spec, image=encoded(picture()), template=encoded(picture()))
    assert lacking.status_code == 400
    assert "runtime parameter `model` defined as `WorkflowParameter`" in lacking.json()["message"]
    assert "step 'det' field 'model_id'" in lacking.json()["message"]
    unfed = run(server, spec, image=encoded(picture()), model="boxes")
    assert unfed.status_code == 400
    assert "`template` defined as `WorkflowImage`" in unfed.json()["message"]
    nothing = run(server, spec, model="boxes")
    assert nothing.status_code == 400 and "`image`" in nothing.json()["message"]


def test_a_session_without_a_value_its_workflow_needs_is_refused_naming_it(server):
    spec = definition(
        [IMAGE, {"type": "WorkflowParameter", "name": "model"}],
        [dict(DETECT, model_id="$inputs.model")],
        [output("boxes", "$steps.det.predictions")],
    )
    source = FrameSourceStream(lambda: SyntheticSource(320, 240, fps=10, frames=3))
    session = Client(server.url).webrtc.stream(
        source, workflow=spec, config=StreamConfig(data_output=["boxes"], realtime_processing=False)
    )
    with pytest.raises(SessionStartError, match="runtime parameter `model`"):
        session.start()


def test_what_the_reference_refuses_without_values_is_still_refused(server):
    for broken, needle in [
        (
            definition(
                [IMAGE],
                [dict(DETECT, model_id="$inputs.nowhere")],
                [output("o", "$steps.det.predictions")],
            ),
            "names no workflow input",
        ),
        (
            definition(
                [IMAGE, {"type": "WorkflowFancyInput", "name": "x"}],
                [dict(DETECT, model_id="$inputs.x")],
                [output("o", "$steps.det.predictions")],
            ),
            "unsupported type 'WorkflowFancyInput'",
        ),
        (
            definition(
                [IMAGE],
                [dict(DETECT, model_id="no-such-model")],
                [output("o", "$steps.det.predictions")],
            ),
            "no-such-model",
        ),
    ]:
        answer = server.post("/workflows/validate", json=broken)
        assert answer.status_code == 400 and needle in answer.json()["message"], answer.text


LABELLED = definition(
    [
        IMAGE,
        {"type": "WorkflowBatchInput", "name": "labels", "kind": ["string"]},
        {"type": "WorkflowBatchInput", "name": "seen", "kind": ["object_detection_prediction"]},
    ],
    [
        step(
            "property_definition@v1",
            "count",
            data="$inputs.seen",
            operations=[{"type": "SequenceLength"}],
        ),
        dict(DETECT),
    ],
    [
        output("label", "$inputs.labels"),
        output("count", "$steps.count.output"),
        output("boxes", "$steps.det.predictions"),
    ],
)


def test_batch_inputs_give_each_image_its_own_value(server):
    # The predictions of one run fed into another: the reference's JSON, one per image.
    (first,) = sdk(server).run_workflow(
        specification=definition([IMAGE], [DETECT], [output("boxes", "$steps.det.predictions")]),
        images={"image": picture()},
    )
    one_box = copy.deepcopy(first["boxes"])
    one_box["predictions"] = one_box["predictions"][:1]
    outs = sdk(server).run_workflow(
        specification=LABELLED,
        images={"image": [picture(50), picture(150)]},
        parameters={"labels": ["left", "right"], "seen": [first["boxes"], one_box]},
    )
    assert [o["label"] for o in outs] == ["left", "right"]
    assert [o["count"] for o in outs] == [2, 1]
    # One value for every image, and a batch of images as an image input.
    images = definition(
        [{"type": "WorkflowBatchInput", "name": "photos", "kind": ["image"]}],
        [dict(DETECT, images="$inputs.photos")],
        [output("boxes", "$steps.det.predictions")],
    )
    outs = run(server, images, photos=[encoded(picture()), encoded(picture(9))])
    assert outs.status_code == 200, outs.text
    assert [len(o["boxes"]["predictions"]) for o in outs.json()["outputs"]] == [2, 2]
    shared = run(
        server, LABELLED, image=[encoded(picture())] * 3, labels="all", seen=first["boxes"]
    )
    assert [o["label"] for o in shared.json()["outputs"]] == ["all"] * 3


def test_batch_inputs_that_do_not_line_up_are_the_references_errors(server):
    uneven = run(server, LABELLED, image=[encoded(picture())] * 3, labels=["a", "b"], seen=[])
    assert uneven.status_code == 400
    assert "be the same length, or of length 1" in uneven.json()["message"]
    missing = run(server, LABELLED, image=encoded(picture()), labels="a")
    assert missing.status_code == 400
    assert "`seen` defined as `WorkflowBatchInput`" in missing.json()["message"]
    deeper = copy.deepcopy(LABELLED)
    deeper["inputs"][1]["dimensionality"] = 3
    refused = server.post("/workflows/validate", json=deeper)
    assert refused.status_code == 400 and "dimensionality 3" in refused.json()["message"]


CROPS_GIVEN = definition(
    [
        IMAGE,
        {"type": "WorkflowBatchInput", "name": "crops", "kind": ["image"], "dimensionality": 2},
    ],
    [
        dict(DETECT, name="on_crops", images="$inputs.crops"),
        step("dimension_collapse@v1", "per_image", data="$steps.on_crops.predictions"),
        dict(DETECT),
    ],
    [output("found", "$steps.per_image.output"), output("boxes", "$steps.det.predictions")],
)


def test_crops_fed_as_an_input_of_dimensionality_two_run_one_level_below_the_image(server):
    assert server.post("/workflows/validate", json=CROPS_GIVEN).status_code == 200
    crop = encoded(picture()[:32, :32])
    answer = run(
        server, CROPS_GIVEN, image=[encoded(picture())] * 2, crops=[[crop, crop, crop], [crop]]
    )
    assert answer.status_code == 200, answer.text
    outs = answer.json()["outputs"]
    # Each image's crops, each crop's two detections: one list per image, one per crop.
    assert [len(o["found"]) for o in outs] == [3, 1]
    assert all(len(found["predictions"]) == 2 for o in outs for found in o["found"])
    flat = run(server, CROPS_GIVEN, image=encoded(picture()), crops=[crop, crop])
    assert flat.status_code == 400
    assert "does not define batch at the 2 dimensionality level" in flat.json()["message"]
    # The crops given are their own lineage: a step's crops cannot be matched with them.
    mixed = copy.deepcopy(CROPS_GIVEN)
    mixed["steps"] += [
        step(
            "dynamic_crop@v1", "crop", images="$inputs.image", predictions="$steps.det.predictions"
        ),
        step(
            "bounding_box_visualization@v1",
            "draw",
            image="$inputs.crops",
            predictions="$steps.crop.predictions",
        ),
    ]
    refused = server.post("/workflows/validate", json=mixed)
    assert refused.status_code == 400 and "different raises" in refused.json()["message"]


COLLAPSED = definition(
    [IMAGE],
    [
        DETECT,
        step("dimension_collapse@v1", "all", data="$steps.det.predictions"),
        step(
            "property_definition@v1",
            "runs",
            data="$steps.all.output",
            operations=[{"type": "SequenceLength"}],
        ),
    ],
    [
        output("boxes", "$steps.det.predictions"),
        output("all", "$steps.all.output"),
        output("runs", "$steps.runs.output"),
    ],
)


def test_collapsing_per_image_data_gathers_every_image_of_the_run(server):
    assert server.post("/workflows/validate", json=COLLAPSED).status_code == 200
    outs = sdk(server).run_workflow(
        specification=COLLAPSED, images={"image": [picture(), picture(1), picture(2)]}
    )
    assert len(outs) == 3
    for out in outs:  # the collapsed value is every image's, in each image's answer
        assert out["runs"] == 3
        assert [len(p["predictions"]) for p in out["all"]] == [2, 2, 2]
        assert out["all"][0]["predictions"] == outs[0]["boxes"]["predictions"]
    (alone,) = sdk(server).run_workflow(specification=COLLAPSED, images={"image": picture()})
    assert alone["runs"] == 1


CROPPED = [
    DETECT,
    step("dynamic_crop@v1", "crop", images="$inputs.image", predictions="$steps.det.predictions"),
    step(
        "roboflow_object_detection_model@v2", "again", images="$steps.crop.crops", model_id="boxes"
    ),
]
CHILD_COLLAPSING = definition(
    [{"type": "WorkflowParameter", "name": "found"}],
    [step("dimension_collapse@v1", "gather", data="$inputs.found")],
    [output("gathered", "$steps.gather.output")],
)
CHILD_PER_CROP = definition(
    [{"type": "WorkflowImage", "name": "crops"}],
    [step("roboflow_object_detection_model@v2", "det", images="$inputs.crops", model_id="boxes")],
    [output("found", "$steps.det.predictions")],
)


def test_collapsing_nests_across_inner_workflows_either_way(server):
    child_collapses = definition(
        [IMAGE],
        [
            *CROPPED,
            step(
                "inner_workflow@v1",
                "child",
                workflow_definition=CHILD_COLLAPSING,
                parameter_bindings={"found": "$steps.again.predictions"},
            ),
        ],
        [output("per_frame", "$steps.child.gathered")],
    )
    parent_collapses = definition(
        [IMAGE],
        [
            *CROPPED[:2],
            step(
                "inner_workflow@v1",
                "child",
                workflow_definition=CHILD_PER_CROP,
                parameter_bindings={"crops": "$steps.crop.crops"},
            ),
            step("dimension_collapse@v1", "gather", data="$steps.child.found"),
        ],
        [output("per_frame", "$steps.gather.output")],
    )
    for spec in (child_collapses, parent_collapses):
        assert server.post("/workflows/validate", json=spec).status_code == 200
        (out,) = sdk(server).run_workflow(specification=spec, images={"image": picture()})
        # One list per frame: the two crops' detections, one entry per crop.
        assert len(out["per_frame"]) == 2
        assert all("predictions" in crop for crop in out["per_frame"])


def zone_spec(model_step: dict) -> dict:
    return definition(
        [IMAGE],
        [
            model_step,
            step(
                "detections_filter@v1",
                "dogs",
                predictions="$steps.det.predictions",
                operations=[
                    {
                        "type": "DetectionsFilter",
                        "filter_operation": {
                            "type": "StatementGroup",
                            "statements": [
                                {
                                    "type": "BinaryStatement",
                                    "left_operand": {
                                        "type": "DynamicOperand",
                                        "operations": [
                                            {
                                                "type": "ExtractDetectionProperty",
                                                "property_name": "class_name",
                                            }
                                        ],
                                    },
                                    "comparator": {"type": "=="},
                                    "right_operand": {"type": "StaticOperand", "value": "dog"},
                                }
                            ],
                        },
                    }
                ],
            ),
            step(
                "dynamic_zone@v1",
                "zone",
                predictions="$steps.dogs.predictions",
                required_number_of_vertices=4,
            ),
        ],
        [output("zones", "$steps.zone.zones"), output("dogs", "$steps.dogs.predictions")],
    )


def test_a_filter_hands_on_the_kind_it_is_given(server):
    segmenting = zone_spec(
        step(
            "roboflow_instance_segmentation_model@v2", "det", images="$inputs.image", model_id="seg"
        )
    )
    assert server.post("/workflows/validate", json=segmenting).status_code == 200
    (out,) = sdk(server).run_workflow(specification=segmenting, images={"image": picture()})
    assert [p["class"] for p in out["dogs"]["predictions"]] == ["dog"]
    assert out["dogs"]["predictions"][0]["points"]  # still a mask: instance segmentation
    (zone,) = out["zones"]
    assert len(zone) == 4
    # Boxes filtered are still boxes: the reference refuses them for a zone of a mask.
    boxes = server.post("/workflows/validate", json=zone_spec(DETECT))
    assert boxes.status_code == 400
    assert "expects instance_segmentation_prediction" in boxes.json()["message"]


def sliced_gate(sink: dict) -> dict:
    """Four slices of a 64 px image, the template looked for on each, a gate on each slice
    letting through those where it is found, and ``sink`` behind the gate."""
    return definition(
        [IMAGE, {"type": "WorkflowImage", "name": "template"}],
        [
            step(
                "image_slicer@v2",
                "tiles",
                image="$inputs.image",
                slice_width=32,
                slice_height=32,
                overlap_ratio_width=0.0,
                overlap_ratio_height=0.0,
            ),
            step(
                "template_matching@v1",
                "find",
                image="$steps.tiles.slices",
                template="$inputs.template",
                matching_threshold=0.9,
            ),
            step(
                "continue_if@v1",
                "busy",
                next_steps=[f"$steps.{sink['name']}"],
                condition_statement={
                    "type": "StatementGroup",
                    "statements": [
                        {
                            "type": "BinaryStatement",
                            "left_operand": {"type": "DynamicOperand", "operand_name": "found"},
                            "comparator": {"type": "(Number) >"},
                            "right_operand": {"type": "StaticOperand", "value": 0},
                        }
                    ],
                },
                evaluation_parameters={"found": "$steps.find.number_of_matches"},
            ),
            sink,
        ],
        [
            output("found", "$steps.find.number_of_matches"),
            output("sent", f"$steps.{sink['name']}.*"),
        ],
    )


def chequered() -> tuple[np.ndarray, np.ndarray]:
    """A grey picture with a patch of noise in its top-right slice only, and the patch."""
    image = picture()
    patch = np.random.default_rng(7).integers(0, 256, (12, 12), dtype=np.uint8)
    image[8:20, 40:52] = patch[..., None]
    return image, image[8:20, 40:52].copy()


def test_a_gate_on_each_slice_governs_a_sink_that_takes_no_slice_data(server, slack):
    image, template = chequered()
    # A Slack step of constants: its queue is worked through when the run's workflow closes,
    # before the answer, so what it sent is known once the run has answered.
    text = "a busy slice (gate test)"
    sink = step(
        "slack_notification@v1",
        "alert",
        slack_token=TOKEN,
        channel=CHANNEL,
        message=text,
        cooldown_seconds=0,
        cooldown_session_key="gate",
    )
    spec = sliced_gate(sink)
    assert server.post("/workflows/validate", json=spec).status_code == 200
    (out,) = sdk(server).run_workflow(
        specification=spec, images={"image": image, "template": template}
    )
    # Found on the top-right slice only: the sink ran there, and on no other.
    assert out["found"] == [0, 1, 0, 0]
    assert [s["error_status"] if s else None for s in out["sent"]] == [None, False, None, None]
    posted = [c for c in slack.of("chat.postMessage") if c.body.get("text") == text]
    assert len(posted) == 1
    # A step fed the whole frame cannot be governed by a decision on each slice.
    blurred = step("image_blur@v1", "blur", image="$inputs.image")
    refused = server.post("/workflows/validate", json=sliced_gate(blurred))
    assert refused.status_code == 400 and "would never run" in refused.json()["message"]


def test_a_slack_step_posts_through_slacks_api(server, slack):
    spec = definition(
        [IMAGE, {"type": "WorkflowParameter", "name": "token"}],
        [
            DETECT,
            step(
                "slack_notification@v1",
                "slack",
                slack_token="$inputs.token",
                channel=CHANNEL,
                message="{{ $parameters.n }} animals",
                message_parameters={"n": "$steps.det.predictions"},
                message_parameters_operations={"n": [{"type": "SequenceLength"}]},
                cooldown_session_key="k",
            ),
        ],
        [output("sent", "$steps.slack.*")],
    )
    assert server.post("/workflows/validate", json=spec).status_code == 200
    before = len(slack.of("chat.postMessage"))
    (out,) = sdk(server).run_workflow(
        specification=spec, images={"image": picture()}, parameters={"token": TOKEN}
    )
    assert out["sent"]["error_status"] is False
    call = slack.wait_calls("chat.postMessage", before + 1)[before]
    assert call.body == {"channel": CHANNEL, "text": "2 animals"}
    assert call.authorization == f"Bearer {TOKEN}"
