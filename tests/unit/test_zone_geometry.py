"""``dynamic_zone`` (a segmentation mask's outline as a polygon of so many corners) and
``perspective_correction`` (a quadrilateral mapped to a rectangle: boxes, masks, keypoints
and the image), on generated masks and a drawn floor."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import supervision as sv

from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.inference.registry import ModelRegistry
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState, WorkflowImage
from streaming.workflows.blocks.dynamic_zone import (
    DynamicZoneBlock,
    DynamicZoneSettings,
    least_squares_polygon,
    simplified_polygon,
)
from streaming.workflows.blocks.model_visualization import (
    ModelComparisonSettings,
    ModelComparisonVisualizationBlock,
)
from streaming.workflows.blocks.perspective import corrected, transform_for

TRAPEZOID = np.array([[60, 20], [140, 20], [190, 110], [10, 110]], np.int32)


def trapezoid_mask() -> np.ndarray:
    mask = np.zeros((120, 200), np.uint8)
    cv2.fillPoly(mask, [TRAPEZOID], 1)
    return mask.astype(bool)


def test_a_mask_outline_becomes_a_polygon_of_the_corners_asked_for():
    outline = max(sv.mask_to_polygons(trapezoid_mask()), key=len)
    four = simplified_polygon(outline, 4)
    assert len(four) == 4
    # Each corner within 2 px of the drawn one (pytest.approx takes no nested sequences).
    assert np.abs(np.sort(four, axis=0) - np.sort(TRAPEZOID, axis=0)).max() <= 2
    refit = least_squares_polygon(outline, four, 0.8)
    assert np.abs(np.sort(refit, axis=0) - np.sort(TRAPEZOID, axis=0)).max() <= 2


def run(spec: dict, registry, image: np.ndarray, **parameters) -> dict:
    workflow = compile_workflow(parse_spec(spec), BuildContext(registry), parameters=parameters)
    try:
        return workflow.run(image, parameters, FrameState())
    finally:
        workflow.close()


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    models = ModelRegistry(Settings(models_dir=tmp_path_factory.mktemp("no-models")))
    yield models
    models.close()


def test_perspective_correction_maps_the_floor_to_a_rectangle(registry):
    floor = np.zeros((120, 200, 3), np.uint8)
    cv2.fillPoly(floor, [TRAPEZOID], (0, 200, 0))
    matrix, width, height = transform_for(TRAPEZOID.tolist(), 100, 50, None, "")
    assert (width, height) == (100, 50)
    # The floor's corners land on the rectangle's: bottom left first, clockwise.
    ends = cv2.perspectiveTransform(TRAPEZOID[None].astype(np.float32), matrix)[0].round()
    assert sorted(map(tuple, ends.tolist())) == [(0, 0), (0, 49), (99, 0), (99, 49)]
    box = sv.Detections(xyxy=np.array([[90.0, 60.0, 110.0, 70.0]]), class_id=np.array([0]))
    ((x1, y1, x2, y2),) = corrected(box, matrix, (100, 50)).xyxy
    assert 35 <= x1 < x2 <= 65 and 10 <= y1 < y2 <= 40  # the floor's middle, in its middle
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"},
                   {"type": "WorkflowParameter", "name": "floor"}],
        "steps": [{"type": "roboflow_core/perspective_correction@v1", "name": "top",
                   "images": "$inputs.image", "perspective_polygons": "$inputs.floor",
                   "transformed_rect_width": 100, "transformed_rect_height": 50,
                   "warp_image": True}],
        "outputs": [{"type": "JsonField", "name": "top", "selector": "$steps.top.*"}],
    }  # fmt: skip
    top = run(spec, registry, floor, floor=[TRAPEZOID.tolist(), [[0, 0], [1, 0], [1, 1]]])["top"]
    warped = top["warped_image"].numpy
    assert warped.shape == (50, 100, 3) and (warped[5:45, 5:95, 1] > 150).all()  # all floor
    spec["steps"][0]["extend_perspective_polygon_by_detections_anchor"] = "somewhere"
    with pytest.raises(WorkflowCompilationError, match="must be one of"):
        run(spec, registry, floor, floor=TRAPEZOID.tolist())


def test_anchors_outside_the_floor_grow_the_rectangle():
    outside = sv.Detections(xyxy=np.array([[0.0, 100.0, 8.0, 118.0]]), class_id=np.array([0]))
    _, width, height = transform_for(TRAPEZOID.tolist(), 100, 50, outside, "BOTTOM_CENTER")
    assert width > 100 and height > 50
    _, width, height = transform_for(TRAPEZOID.tolist(), 100, 50, outside, "")
    assert (width, height) == (100, 50)


def test_dynamic_zone_gives_zones_from_masks(registry):
    detections = sv.Detections(xyxy=np.array([[10.0, 20.0, 190.0, 110.0]]),
                               mask=trapezoid_mask()[None], class_id=np.array([0]))  # fmt: skip
    block = DynamicZoneBlock("zone", DynamicZoneSettings(
        required_number_of_vertices=4, scale_ratio=1.0, apply_least_squares=False,
        midpoint_fraction=1.0), BuildContext(registry))  # fmt: skip
    out = block.run({"predictions": detections}, FrameState())
    assert out["simplification_converged"] and len(out["zones"][0]) == 4
    assert out["predictions"].mask.shape == (1, 120, 200)
    bigger = DynamicZoneBlock("zone", DynamicZoneSettings(
        required_number_of_vertices=4, scale_ratio=1.2, apply_least_squares=True,
        midpoint_fraction=0.5), BuildContext(registry)).run({"predictions": detections},
                                                              FrameState())  # fmt: skip
    assert cv2.contourArea(np.array(bigger["zones"][0], np.int32)) > cv2.contourArea(TRAPEZOID)


def test_model_comparison_tints_what_only_one_model_found(registry):
    def boxes(*xyxy: tuple[int, int, int, int]) -> sv.Detections:
        return sv.Detections(xyxy=np.array(xyxy, float), class_id=np.zeros(len(xyxy), int))

    settings = ModelComparisonSettings(copy_image=True, color_a="GREEN", color_b="RED",
                                       background_color="BLACK", opacity=1.0)  # fmt: skip
    block = ModelComparisonVisualizationBlock("cmp", settings, BuildContext(registry))
    scene = np.full((40, 60, 3), 100, np.uint8)
    given = {"image": WorkflowImage(scene, "image"), "predictions_a": boxes((0, 0, 30, 40)),
             "predictions_b": boxes((20, 0, 60, 40))}  # fmt: skip
    out = block.run(given, FrameState())["image"].numpy
    assert out[5, 5].tolist() == [0, 255, 0]  # only A: green (BGR)
    assert out[5, 50].tolist() == [0, 0, 255]  # only B: red
    assert out[5, 25].tolist() == [100, 100, 100]  # both: as it was
    assert (scene == 100).all()  # drawn on a copy
