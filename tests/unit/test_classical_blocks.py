"""The reference's model-free image blocks on generated scenes and the darknet photos:
motion (``background_subtraction``, ``motion_detection``), sharpness (``camera_focus`` v1,
v2), features (``sift``, ``sift_comparison`` v1, v2) and ``template_matching`` with the
template as a second, still image input."""

from __future__ import annotations

import asyncio
import base64

import cv2
import numpy as np
import pytest

from streaming.config import Settings
from streaming.egress import EgressPolicy
from streaming.errors import WorkflowCompilationError
from streaming.inference.registry import ModelRegistry
from streaming.protocol.messages import WorkflowConfiguration
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from streaming.workflows.runner import compile_config
from tests.conftest import load_photo


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    models = ModelRegistry(Settings(models_dir=tmp_path_factory.mktemp("no-models")))
    yield models
    models.close()


def spec_of(*steps: dict, outputs: dict[str, str], inputs: tuple[dict, ...] = ()) -> dict:
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}, *inputs],
        "steps": list(steps),
        "outputs": [{"type": "JsonField", "name": n, "selector": s} for n, s in outputs.items()],
    }


def step(kind: str, **fields) -> dict:
    return {"type": f"roboflow_core/{kind}", "name": "s", "image": "$inputs.image", **fields}


def frames(spec: dict, registry, images: list[np.ndarray], **parameters) -> list[dict]:
    workflow = compile_workflow(parse_spec(spec), BuildContext(registry), parameters=parameters)
    try:
        return [workflow.run(i, parameters, FrameState()) for i in images]
    finally:
        workflow.close()


def scene(square_at: int | None) -> np.ndarray:
    """Grey 160x120 with a white 30x30 square at x = ``square_at`` (none when None)."""
    image = np.full((120, 160, 3), 90, np.uint8)
    if square_at is not None:
        image[40:70, square_at : square_at + 30] = 255
    return image


def test_motion_detection_learns_then_reports_where_and_when_motion_starts(registry):
    outputs = {"motion": "$steps.s.motion", "alarm": "$steps.s.alarm",
               "boxes": "$steps.s.detections", "zones": "$steps.s.motion_zones"}  # fmt: skip
    spec = spec_of(step("motion_detection@v1", history=5, minimum_contour_area=100),
                   outputs=outputs)  # fmt: skip
    still = [scene(None)] * 8
    moving = [scene(20 + 10 * i) for i in range(3)]
    out = frames(spec, registry, still + moving)
    assert not any(o["motion"] or o["alarm"] for o in out[:8])  # learning, then nothing moves
    first, second = out[8], out[9]
    assert first["motion"] and first["alarm"] and second["motion"] and not second["alarm"]
    x1, y1, x2, y2 = first["boxes"].xyxy[0]
    assert x1 >= 15 and x2 <= 55 and y1 >= 35 and y2 <= 75
    assert list(first["boxes"].data["class_name"]) == ["motion"] and len(first["zones"][0]) >= 3


def test_motion_outside_the_detection_zone_is_not_motion(registry):
    right_half = [[80, 0], [160, 0], [160, 120], [80, 120]]
    for zone in (right_half, str(right_half).replace("'", '"')):  # a list, or its JSON
        spec = spec_of(step("motion_detection@v1", history=5, detection_zone=zone),
                       outputs={"motion": "$steps.s.motion"})  # fmt: skip
        out = frames(spec, registry, [scene(None)] * 8 + [scene(20), scene(30)])
        assert not any(o["motion"] for o in out)
    with pytest.raises(WorkflowCompilationError, match="detection_zone"):
        frames(spec_of(step("motion_detection@v1", detection_zone="[[1, 2"),
                       outputs={"motion": "$steps.s.motion"}), registry, [])  # fmt: skip


def test_background_subtraction_shows_the_foreground_white(registry):
    spec = spec_of(step("background_subtraction@v1", history=5),
                   outputs={"mask": "$steps.s.image"})  # fmt: skip
    out = frames(spec, registry, [scene(None)] * 8 + [scene(50)])
    mask = out[-1]["mask"].numpy
    assert mask.shape == (120, 160, 3)
    assert mask[45:65, 55:75].min() > 0 and mask[:30].max() == 0  # the square, nothing else


def test_camera_focus_scores_a_sharp_photo_above_its_blurred_copy(registry, photos):
    photo = load_photo(photos, "dog.jpg")
    blurred = cv2.GaussianBlur(photo, (15, 15), 5)
    v1 = spec_of(step("camera_focus@v1"), outputs={"focus": "$steps.s.focus_measure",
                                                   "map": "$steps.s.image"})  # fmt: skip
    sharp, soft = frames(v1, registry, [photo, blurred])
    assert sharp["focus"] > 3 * soft["focus"] and sharp["map"].numpy.shape == photo.shape
    v2 = spec_of(
        {"type": "roboflow_core/camera_focus@v2", "name": "s", "image": "$inputs.image",
         "detections": "$steps.m.detections"},
        step("motion_detection@v1", name="m", history=1, suppress_first_detections=False),
        outputs={"focus": "$steps.s.focus_measure", "boxes": "$steps.s.bbox_focus_measures",
                 "shown": "$steps.s.image"},
    )  # fmt: skip
    sharp, soft = frames(v2, registry, [photo, blurred])
    assert sharp["focus"] > 3 * soft["focus"]
    assert isinstance(sharp["boxes"], list)
    assert not np.array_equal(sharp["shown"].numpy, photo)  # the aids drawn on a copy
    plain = spec_of(step("camera_focus@v2", show_zebra_warnings=False, show_hud=False,
                         show_focus_peaking=False, show_center_marker=False,
                         grid_overlay="None"), outputs={"shown": "$steps.s.image"})  # fmt: skip
    assert np.array_equal(frames(plain, registry, [photo])[0]["shown"].numpy, photo)
    with pytest.raises(WorkflowCompilationError, match="grid_overlay must be one of"):
        frames(spec_of(step("camera_focus@v2", grid_overlay="7x7"),
                       outputs={"f": "$steps.s.focus_measure"}), registry, [])  # fmt: skip


def test_sift_comparison_matches_a_photo_with_itself_and_not_with_another(registry, photos):
    dog, person = load_photo(photos, "dog.jpg"), load_photo(photos, "person.jpg")
    spec = spec_of(
        step("sift@v1", name="a"),
        {"type": "roboflow_core/sift@v1", "name": "b", "image": "$inputs.other"},
        {"type": "roboflow_core/sift_comparison@v1", "name": "v1",
         "descriptor_1": "$steps.a.descriptors", "descriptor_2": "$steps.b.descriptors"},
        {"type": "roboflow_core/sift_comparison@v2", "name": "v2", "input_1": "$inputs.image",
         "input_2": "$inputs.other", "visualize": True, "matcher": "BFMatcher"},
        outputs={"v1": "$steps.v1.*", "v2": "$steps.v2.*", "keypoints": "$steps.a.keypoints"},
        inputs=({"type": "InferenceImage", "name": "other"},),
    )  # fmt: skip
    (same,) = frames(spec, registry, [dog], other=dog)
    assert same["v1"]["images_match"] and same["v2"]["images_match"]
    assert same["v2"]["visualization_matches"].numpy.shape[1] == 2 * dog.shape[1]
    assert same["keypoints"] and set(same["keypoints"][0]) >= {"pt", "size", "angle"}
    (different,) = frames(spec, registry, [dog], other=person)
    assert not different["v1"]["images_match"] and not different["v2"]["images_match"]
    assert different["v2"]["good_matches_count"] < same["v2"]["good_matches_count"]


def test_template_matching_finds_a_still_template_sent_as_base64(registry, photos):
    photo = load_photo(photos, "dog.jpg")
    template = photo[200:260, 300:380].copy()
    encoded = base64.b64encode(cv2.imencode(".png", template)[1].tobytes()).decode()
    spec = spec_of(
        {"type": "roboflow_core/template_matching@v1", "name": "s", "image": "$inputs.image",
         "template": "$inputs.template", "matching_threshold": 0.9},
        outputs={"found": "$steps.s.predictions", "count": "$steps.s.number_of_matches"},
        inputs=({"type": "WorkflowImage", "name": "template"},),
    )  # fmt: skip
    config = WorkflowConfiguration(
        workflows_parameters={"template": {"type": "base64", "value": encoded}}
    )
    workflow = asyncio.run(compile_config(config, spec, BuildContext(registry),
                                          egress=EgressPolicy(["127.0.0.0/8"])))  # fmt: skip
    try:
        out = workflow.run(photo, {}, FrameState())
    finally:
        workflow.close()
    assert out["count"] == 1
    assert out["found"].xyxy[0].tolist() == [300, 200, 380, 260]
    # Without the template, the step is refused by name.
    missing = r"runtime parameter `template` defined as `WorkflowImage`.*not provided"
    with pytest.raises(WorkflowCompilationError, match=missing):
        frames(spec, registry, [photo])
