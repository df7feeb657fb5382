"""Workflows in two stages, through the engine's batch dimensions: detect, crop each
detection, classify every crop (one model run for all of a frame's crops), and bring the
answers back onto the detections or into one list per frame. The detector is a fixed-output
ONNX export (a dog and a cat at known boxes); the classifier is a real one of the simplest
kind (each crop's dominant colour), so what each crop is told depends on its pixels."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.inference.registry import ModelRegistry
from streaming.metrics import Metrics
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from streaming.workflows.blocks.secrets import EnvironmentSecretsStoreBlock, SecretsSettings
from streaming.workflows.blocks.slicing import slice_offsets
from streaming.workflows.serialization import serialize_value
from tests.support.onnx_models import YOLO_ROWS, colour_classifier_directory, model_directory

DOG_BOX, CAT_BOX = (15, 18, 25, 30), (36, 36, 44, 44)  # the fixed detector's, in pixels
RED, BLUE = (0, 0, 255), (255, 0, 0)  # BGR


@pytest.fixture(scope="module")
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture(scope="module")
def models(tmp_path_factory, metrics):
    root = tmp_path_factory.mktemp("models")
    model_directory(root, "boxes", [("output", YOLO_ROWS)], decoder="yolov3")
    colour_classifier_directory(root)
    registry = ModelRegistry(Settings(models_dir=root), metrics)
    yield registry
    registry.close()


def scene() -> np.ndarray:
    """64x64: the dog's box painted red, the cat's blue, the rest black."""
    image = np.zeros((64, 64, 3), np.uint8)
    for (x1, y1, x2, y2), colour in ((DOG_BOX, RED), (CAT_BOX, BLUE)):
        image[y1:y2, x1:x2] = colour
    return image


def step(kind: str, name: str, **fields) -> dict:
    return {"type": f"roboflow_core/{kind}", "name": name, **fields}


DETECT = step("roboflow_object_detection_model@v2", "det", images="$inputs.image",
              model_id="boxes")  # fmt: skip
CROP = step("dynamic_crop@v1", "crop", images="$inputs.image", predictions="$steps.det.predictions")
CLASSIFY = step("roboflow_classification_model@v2", "cls", images="$steps.crop.crops",
                model_id="colours")  # fmt: skip
TWO_STAGE = {
    "version": "1.0",
    "inputs": [{"type": "InferenceImage", "name": "image"}],
    "steps": [
        DETECT,
        CROP,
        CLASSIFY,
        step(
            "detections_classes_replacement@v1",
            "swap",
            object_detection_predictions="$steps.det.predictions",
            classification_predictions="$steps.cls.predictions",
        ),
        step("dimension_collapse@v1", "all", data="$steps.cls.predictions"),
    ],
    "outputs": [
        {"type": "JsonField", "name": "crops", "selector": "$steps.crop.crops"},
        {"type": "JsonField", "name": "classes", "selector": "$steps.cls.predictions"},
        {"type": "JsonField", "name": "relabelled", "selector": "$steps.swap.predictions"},
        {"type": "JsonField", "name": "collapsed", "selector": "$steps.all.output"},
        {"type": "JsonField", "name": "detections", "selector": "$steps.det.predictions"},
    ],
}


def compile_spec(spec: dict, models: ModelRegistry):
    return compile_workflow(parse_spec(spec), BuildContext(models))


def run(spec: dict, models: ModelRegistry, image: np.ndarray | None = None) -> dict:
    workflow = compile_spec(spec, models)
    try:
        return workflow.run(scene() if image is None else image, {}, FrameState())
    finally:
        workflow.close()


def batches_of(metrics: Metrics, model: str) -> tuple[float, float]:
    """The classifier's model runs so far, and the images they held."""
    for family in text_string_to_metric_families(metrics.render().decode()):
        if family.name == "visionstream_batch_size":
            samples = {s.name: s.value for s in family.samples if s.labels.get("model") == model}
            return samples.get(family.name + "_count", 0), samples.get(family.name + "_sum", 0)
    return 0, 0


def test_each_crop_is_classified_and_its_class_replaces_its_detections(models, metrics):
    workflow = compile_spec(TWO_STAGE, models)  # the models loaded (and warmed up) here
    runs_before, images_before = batches_of(metrics, "colours")
    try:
        out = workflow.run(scene(), {}, FrameState())
    finally:
        workflow.close()
    # One crop per detection, each where its box is, named for the detection it came from.
    detections = out["detections"]
    order = np.argsort(detections.data["class_name"])  # cat, dog
    ids = [str(i) for i in detections.data["detection_id"][order]]
    crops = out["crops"]
    by_parent = {crop.parent_id: crop for crop in crops}
    assert sorted(by_parent) == sorted(ids)
    cat_crop, dog_crop = by_parent[ids[0]], by_parent[ids[1]]
    assert (cat_crop.parent_origin.offset_x, cat_crop.parent_origin.offset_y) == CAT_BOX[:2]
    assert dog_crop.numpy.shape[:2] == (DOG_BOX[3] - DOG_BOX[1], DOG_BOX[2] - DOG_BOX[0])
    # Every crop classified by its own pixels, the answers matched to their crops.
    tops = {c["parent_id"]: c["top"] for c in out["classes"]}
    assert tops == {ids[0]: "blue", ids[1]: "red"}
    # The classes replace the detections' (same boxes), and all answers come back as one list.
    relabelled = out["relabelled"]
    assert sorted(relabelled.data["class_name"]) == ["blue", "red"]
    assert np.allclose(sorted(relabelled.xyxy.tolist()), sorted(detections.xyxy.tolist()))
    assert [c["top"] for c in out["collapsed"]] == [c["top"] for c in out["classes"]]
    # Both crops went through the classifier in one model run.
    runs, images = batches_of(metrics, "colours")
    assert (runs - runs_before, images - images_before) == (1, 2)


def test_crops_serialise_with_their_place_in_the_frame(models):
    out = run(TWO_STAGE, models)
    crops = serialize_value(out["crops"], 80, None)
    assert len(crops) == 2
    for crop in crops:
        assert crop["type"] == "base64" and crop["parent_id"] and crop["root_parent_id"] == "image"
        origin = crop["parent_origin"]
        assert (origin["width"], origin["height"]) == (64, 64)
        assert crop["root_parent_origin"] == origin  # cut from the frame itself
        assert (origin["offset_x"], origin["offset_y"]) in (DOG_BOX[:2], CAT_BOX[:2])


def test_a_frame_without_detections_gives_empty_lists(models):
    spec = copy.deepcopy(TWO_STAGE)
    spec["steps"][0]["confidence"] = 0.99  # above both fixed detections
    out = run(spec, models)
    assert out["crops"] == [] and out["classes"] == [] and out["collapsed"] == []
    assert len(out["relabelled"]) == 0


def test_flow_control_on_each_crop_runs_the_next_step_on_the_chosen_crops_only(models):
    spec = copy.deepcopy(TWO_STAGE)
    spec["steps"] += [
        step("continue_if@v1", "only_red", next_steps=["$steps.again"],
             condition_statement={
                 "type": "StatementGroup",
                 "statements": [{
                     "type": "BinaryStatement",
                     "left_operand": {
                         "type": "DynamicOperand", "operand_name": "answer",
                         "operations": [{"type": "ClassificationPropertyExtract",
                                         "property_name": "top_class"}],
                     },
                     "comparator": {"type": "=="},
                     "right_operand": {"type": "StaticOperand", "value": "red"},
                 }],
             },
             evaluation_parameters={"answer": "$steps.cls.predictions"}),
        step("roboflow_classification_model@v2", "again", images="$steps.crop.crops",
             model_id="colours"),
    ]  # fmt: skip
    spec["outputs"].append({"type": "JsonField", "name": "again", "selector": "$steps.again.*"})
    spec["steps"].append(step("first_non_empty_or_default@v1", "either",
                              data=["$steps.again.predictions"], default="not red"))  # fmt: skip
    spec["outputs"].append(
        {"type": "JsonField", "name": "either", "selector": "$steps.either.output"}
    )
    out = run(spec, models)
    tops = [c["top"] for c in out["classes"]]
    again = [a["predictions"] for a in out["again"]]  # a dict per crop, as the reference
    assert [a is not None for a in again] == [t == "red" for t in tops]
    assert [a["top"] for a in again if a is not None] == ["red"]
    # Where the second classifier did not run, the default stands in, crop by crop.
    assert [e if isinstance(e, str) else e["top"] for e in out["either"]] == [
        "red" if t == "red" else "not red" for t in tops
    ]


GATE = step(
    "continue_if@v1",
    "gate",
    next_steps=["$steps.frame_step"],
    condition_statement={"type": "StatementGroup", "statements": []},
    evaluation_parameters={"answer": "$steps.cls.predictions"},
)
MISFITS = {
    # A crop-level value and a frame-level one meet in a step that takes one level.
    "different dimensions": [
        step("bounding_box_visualization@v1", "draw", image="$inputs.image",
             predictions="$steps.crop.predictions"),
    ],
    # Crops of two different crop steps matched in one step.
    "different raises": [
        dict(CROP, name="crop2"),
        step("bounding_box_visualization@v1", "draw", image="$steps.crop2.crops",
             predictions="$steps.crop.predictions"),
    ],
    # The run's frames collapsed once are one value: nothing is left to collapse.
    "none of its inputs has one to collapse": [
        step("dimension_collapse@v1", "flat", data="$steps.det.predictions"),
        step("dimension_collapse@v1", "flatter", data="$steps.flat.output"),
    ],
    # Classes at the frame's level where one per crop is expected.
    "expects it at 2": [
        step("detections_classes_replacement@v1", "bad",
             object_detection_predictions="$steps.det.predictions",
             classification_predictions="$steps.all.output"),
    ],
    # A decision on each crop cannot gate a step that runs once per frame.
    "would never run": [
        GATE,
        step("bounding_box_visualization@v1", "frame_step", image="$inputs.image",
             predictions="$steps.det.predictions"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("message", sorted(MISFITS))
def test_inputs_that_do_not_fit_are_refused_naming_the_step(models, message):
    spec = copy.deepcopy(TWO_STAGE)
    spec["steps"] += copy.deepcopy(MISFITS[message])
    with pytest.raises(WorkflowCompilationError, match=message) as caught:
        compile_spec(spec, models)
    assert "step '" in str(caught.value)


def test_static_crops_cut_one_region_of_each_image_in_pixels_or_fractions(models):
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            step("absolute_static_crop@v1", "pixels", images="$inputs.image",
                 x_center=20, y_center=24, width=10, height=12),
            step("relative_static_crop@v1", "fractions", images="$inputs.image",
                 x_center=0.625, y_center=0.625, width=0.125, height=0.125),
            step("absolute_static_crop@v1", "outside", images="$inputs.image",
                 x_center=200, y_center=200, width=10, height=10),
            step("roboflow_classification_model@v2", "cls", images="$steps.pixels.crops",
                 model_id="colours"),
        ],
        "outputs": [
            {"type": "JsonField", "name": name, "selector": f"$steps.{name}.crops"}
            for name in ("pixels", "fractions", "outside")
        ] + [{"type": "JsonField", "name": "cls", "selector": "$steps.cls.predictions"}],
    }  # fmt: skip
    out = run(spec, models)
    # One crop per image (no new dimension): the dog's red box, and the cat's blue one.
    pixels, fractions = out["pixels"], out["fractions"]
    assert (pixels.parent_origin.offset_x, pixels.parent_origin.offset_y) == DOG_BOX[:2]
    assert pixels.numpy.shape[:2] == (12, 10) and (pixels.numpy == RED).all()
    assert fractions.numpy.shape[:2] == (8, 8) and (fractions.numpy == BLUE).all()
    assert out["outside"] is None
    assert out["cls"]["top"] == "red" and out["cls"]["parent_id"] == pixels.parent_id


def test_slice_offsets_v1_clip_the_last_tiles_and_v2_moves_them_inside():
    v1 = slice_offsets((100, 50), (40, 40), (0.0, 0.0), centred=False)
    assert v1 == [(0, 0, 40, 40), (40, 0, 80, 40), (80, 0, 100, 40),
                  (0, 40, 40, 50), (40, 40, 80, 50), (80, 40, 100, 50)]  # fmt: skip
    v2 = slice_offsets((100, 50), (40, 40), (0.0, 0.0), centred=True)
    assert v2 == [(0, 0, 40, 40), (40, 0, 80, 40), (60, 0, 100, 40),
                  (0, 10, 40, 50), (40, 10, 80, 50), (60, 10, 100, 50)]  # fmt: skip
    # Overlap: a 20 % overlap of 40 px tiles is a 32 px stride.
    assert [x for x, *_ in slice_offsets((100, 40), (40, 40), (0.2, 0.0), True)] == [0, 32, 60]


def test_detections_on_every_slice_are_stitched_back_onto_the_image(models):
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            step("image_slicer@v2", "tiles", image="$inputs.image", slice_width=32,
                 slice_height=32, overlap_ratio_width=0.0, overlap_ratio_height=0.0),
            step("roboflow_object_detection_model@v2", "det", images="$steps.tiles.slices",
                 model_id="boxes"),
            step("detections_stitch@v1", "stitch", reference_image="$inputs.image",
                 predictions="$steps.det.predictions"),
        ],
        "outputs": [
            {"type": "JsonField", "name": "tiles", "selector": "$steps.tiles.slices"},
            {"type": "JsonField", "name": "stitched", "selector": "$steps.stitch.predictions"},
        ],
    }  # fmt: skip
    out = run(spec, models)
    corners = [(t.parent_origin.offset_x, t.parent_origin.offset_y) for t in out["tiles"]]
    assert corners == [(0, 0), (32, 0), (0, 32), (32, 32)]
    # The fixed detector finds its dog and cat on each 32 px tile (at half their 64 px
    # places); stitched, each tile's pair lies in that tile, on the image's coordinates.
    stitched = out["stitched"]
    assert len(stitched) == 8
    for x, y in corners:
        inside = [b for b in stitched.xyxy.tolist()
                  if x <= b[0] and b[2] <= x + 32 and y <= b[1] and b[3] <= y + 32]  # fmt: skip
        assert sorted(round(b[0] - x, 1) for b in inside) == [7.5, 18.0]
    assert set(stitched.data["parent_id"]) == {"image"}


@pytest.mark.parametrize(
    ("units", "offset", "grown"),
    [
        ("Pixels", (4, 4), (13, 16, 27, 32)),  # 2 px on each side
        ("Percent (%)", (40, 50), (13, 15, 27, 33)),  # of the dog's 10x12 box, half each side
    ],
)
def test_boxes_grown_by_an_offset_are_cropped_with_their_margin(models, units, offset, grown):
    spec = copy.deepcopy(TWO_STAGE)
    grow = step("detection_offset@v1", "grow", predictions="$steps.det.predictions",
                offset_x=offset[0], offset_y=offset[1], units=units)  # fmt: skip
    spec["steps"].insert(1, grow)
    spec["steps"][2]["predictions"] = "$steps.grow.predictions"
    spec["outputs"].append({"type": "JsonField", "name": "grown", "selector": "$steps.grow.*"})
    out = run(spec, models)
    boxes = out["grown"]["predictions"]
    dog = [b for b, name in zip(boxes.xyxy.tolist(), boxes.data["class_name"], strict=True)
           if name == "dog"]  # fmt: skip
    assert dog == [list(map(float, grown))]
    # New ids, each naming the detection it grew from; the crops are of the grown boxes.
    assert set(boxes.data["parent_id"]) == set(out["detections"].data["detection_id"])
    shapes = sorted(c.numpy.shape[:2] for c in out["crops"])
    assert (grown[3] - grown[1], grown[2] - grown[0]) in shapes


SWITCH = {
    "type": "CasesDefinition",
    "cases": [{
        "type": "CaseDefinition",
        "condition": {"type": "StatementGroup", "statements": [{
            "type": "BinaryStatement",
            "left_operand": {"type": "DynamicOperand", "operand_name": "answer"},
            "comparator": {"type": "=="},
            "right_operand": {"type": "StaticOperand", "value": "red"},
        }]},
        "result": {"type": "StaticCaseResult", "value": "stop"},
    }],
    "default": {"type": "DynamicCaseResult", "parameter_name": "answer",
                "operations": [{"type": "StringToUpperCase"}]},
}  # fmt: skip


def test_an_expression_switches_on_each_crops_answer(models):
    spec = copy.deepcopy(TWO_STAGE)
    extract = [{"type": "ClassificationPropertyExtract", "property_name": "top_class"}]
    spec["steps"].append(step("expression@v1", "say", data={"answer": "$steps.cls.predictions"},
                              data_operations={"answer": extract}, switch=SWITCH))  # fmt: skip
    spec["outputs"].append({"type": "JsonField", "name": "said", "selector": "$steps.say.output"})
    out = run(spec, models)
    tops = [c["top"] for c in out["classes"]]
    assert out["said"] == ["stop" if t == "red" else t.upper() for t in tops]
    # Operations on a value the data does not have are refused when compiled.
    spec["steps"][-1]["data_operations"] = {"other": extract}
    with pytest.raises(WorkflowCompilationError, match="data_operations: names \\['other'\\]"):
        compile_spec(spec, models)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('Sure:\n```json\n{"plate": "AB123", "ok": true}\n```', (False, "AB123", True)),
        ('{"plate": "AB123"}', (True, "AB123", None)),  # "ok" missing
        ("not json at all", (True, None, None)),
    ],
)
def test_json_in_a_text_becomes_one_output_per_expected_field(models, text, expected):
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"},
                   {"type": "WorkflowParameter", "name": "text"}],
        "steps": [step("json_parser@v1", "parse", raw_json="$inputs.text",
                       expected_fields=["plate", "ok"])],
        "outputs": [{"type": "JsonField", "name": n, "selector": f"$steps.parse.{n}"}
                    for n in ("error_status", "plate", "ok")],
    }  # fmt: skip
    workflow = compile_workflow(parse_spec(spec), BuildContext(models), parameters={"text": text})
    try:
        out = workflow.run(scene(), {}, FrameState())
    finally:
        workflow.close()
    assert (out["error_status"], out["plate"], out["ok"]) == expected


def test_detections_combine_into_one_set_and_merge_into_one_box(models):
    spec = copy.deepcopy(TWO_STAGE)
    spec["steps"] += [
        step("detections_combine@v1", "both", prediction_one="$steps.det.predictions",
             prediction_two="$steps.swap.predictions"),
        step("detections_merge@v1", "one", predictions="$steps.det.predictions"),
    ]  # fmt: skip
    spec["outputs"] += [{"type": "JsonField", "name": n, "selector": f"$steps.{n}.predictions"}
                        for n in ("both", "one")]  # fmt: skip
    out = run(spec, models)
    both = out["both"]
    assert sorted(both.data["class_name"]) == ["blue", "cat", "dog", "red"]
    one = out["one"]
    assert one.xyxy.tolist() == [[15.0, 18.0, 44.0, 44.0]]  # around the dog and the cat
    assert list(one.data["class_name"]) == ["merged_detection"]
    assert float(one.confidence[0]) == pytest.approx(float(out["detections"].confidence.min()))


def test_a_csv_row_per_crop_with_its_columns_and_a_timestamp(models):
    spec = copy.deepcopy(TWO_STAGE)
    extract = [{"type": "ClassificationPropertyExtract", "property_name": "top_class"}]
    spec["steps"].append(step("csv_formatter@v1", "rows",
                              columns_data={"colour": "$steps.cls.predictions", "note": "=cmd()"},
                              columns_operations={"colour": extract}))  # fmt: skip
    spec["outputs"].append({"type": "JsonField", "name": "rows", "selector": "$steps.rows.*"})
    out = run(spec, models)
    rows = [r["csv_content"] for r in out["rows"]]  # a dict per crop
    assert len(rows) == 2  # one per crop
    for csv_text, answer in zip(rows, out["classes"], strict=True):
        header, line = csv_text.splitlines()
        assert header == "colour,note,timestamp"
        colour, note, stamp = line.split(",")
        assert (colour, note) == (answer["top"], "'=cmd()")  # a formula, quoted
        assert stamp.endswith("+00:00")


def file_sink_spec(**sink) -> dict:
    count = [{"type": "SequenceLength"}]
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            DETECT,
            step("csv_formatter@v1", "row", columns_data={"found": "$steps.det.predictions"},
                 columns_operations={"found": count}),
            step("local_file_sink@v1", "save", content="$steps.row.csv_content",
                 **{"output_mode": "append_log", "target_directory": "counts", **sink}),
        ],
        "outputs": [{"type": "JsonField", "name": "saved", "selector": "$steps.save.*"}],
    }  # fmt: skip


def test_a_local_file_sink_appends_csv_rows_to_files_inside_its_directory(models, tmp_path):
    context = BuildContext(models, settings=Settings(file_sink_dir=tmp_path))
    workflow = compile_workflow(parse_spec(file_sink_spec(max_entries_per_file=2)), context)
    try:
        saved = [workflow.run(scene(), {}, FrameState())["saved"] for _ in range(3)]
    finally:
        workflow.close()
    assert {s["error_status"] for s in saved} == {False}
    files = sorted((tmp_path / "counts").iterdir())
    assert [f.suffix for f in files] == [".csv", ".csv"]  # a new file after 2 entries
    first = files[0].read_text().splitlines()
    assert first[0] == "found,timestamp" and [r.split(",")[0] for r in first[1:]] == ["2", "2"]
    assert len(files[1].read_text().splitlines()) == 2  # its own header, one row
    assert all(f.name.startswith("workflow_output_") for f in files)


@pytest.mark.parametrize(
    ("sink", "message"),
    [
        ({"target_directory": "../elsewhere"}, "outside the file sink directory"),
        ({"target_directory": "/etc"}, "outside the file sink directory"),
        ({"target_directory": "link"}, "outside the file sink directory"),  # a symlink out
        ({"file_name_prefix": "../x"}, "file_name_prefix must be a file name"),
    ],
)
def test_a_local_file_sink_never_writes_outside_its_directory(models, tmp_path, sink, message):
    root = tmp_path / "files"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    context = BuildContext(models, settings=Settings(file_sink_dir=root))
    with pytest.raises(WorkflowCompilationError, match=message):
        compile_workflow(parse_spec(file_sink_spec(**sink)), context)
    # Without the setting, no local_file_sink at all: the message names it.
    with pytest.raises(WorkflowCompilationError, match="VISIONSTREAM_FILE_SINK_DIR"):
        compile_workflow(parse_spec(file_sink_spec()), BuildContext(models, settings=Settings()))


@pytest.mark.parametrize(
    ("operation", "shape"),
    [
        ({"task_type": "resize", "width": 32, "height": None}, (32, 32)),  # aspect kept
        ({"task_type": "resize", "width": 40, "height": 20}, (20, 40)),
        ({"task_type": "rotate", "rotation_degrees": 90}, (64, 64)),
        ({"task_type": "flip", "flip_type": "horizontal"}, (64, 64)),
    ],
)
def test_images_are_preprocessed_before_a_model_and_crops_stay_crops(models, operation, shape):
    spec = copy.deepcopy(TWO_STAGE)
    spec["steps"] += [
        step("image_preprocessing@v1", "prep", image="$inputs.image", **operation),
        step("convert_grayscale@v1", "grey", image="$steps.crop.crops"),
    ]
    spec["outputs"] += [
        {"type": "JsonField", "name": "prep", "selector": "$steps.prep.image"},
        {"type": "JsonField", "name": "grey", "selector": "$steps.grey.image"},
    ]
    out = run(spec, models)
    prep = out["prep"].numpy
    assert prep.shape[:2] == shape
    if operation["task_type"] == "flip":  # the dog's red box, mirrored left to right
        assert (prep[24, 64 - 20] == RED).all() and (prep[24, 20] == 0).all()
    # Each crop in grey (three equal channels), still where it was cut from.
    for grey, crop in zip(out["grey"], out["crops"], strict=True):
        assert grey.numpy.shape == crop.numpy.shape and grey.parent_origin == crop.parent_origin
        assert (grey.numpy[..., 0] == grey.numpy[..., 2]).all()


def test_contrast_is_stretched_and_morphology_removes_specks(models):
    dull = np.full((32, 32, 3), 100, np.uint8)
    dull[8:24, 8:24] = 140  # a square a little brighter than its ground
    speck = dull.copy()
    speck[2, 2] = 255  # one bright pixel that an opening removes
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            step("contrast_enhancement@v1", "stretch", image="$inputs.image"),
            step("morphological_transformation@v2", "open", image="$inputs.image",
                 operation="Opening", kernel_size=3),
            step("morphological_transformation@v1", "grey_close", image="$inputs.image"),
        ],
        "outputs": [{"type": "JsonField", "name": n, "selector": f"$steps.{n}.image"}
                    for n in ("stretch", "open", "grey_close")],
    }  # fmt: skip
    out = run(spec, models, dull)
    stretched = out["stretch"].numpy
    assert stretched[0, 0].tolist() == [0, 0, 0] and stretched[16, 16].tolist() == [255] * 3
    out = run(spec, models, speck)
    assert out["open"].numpy[2, 2].tolist() == [100, 100, 100]  # the speck is gone
    grey = out["grey_close"].numpy
    assert grey.shape == speck.shape and (grey[..., 0] == grey[..., 1]).all()
    with pytest.raises(WorkflowCompilationError, match="operation must be one of"):
        bad = copy.deepcopy(spec)
        bad["steps"][2]["operation"] = "Opening then Closing"  # v2's, not v1's
        compile_spec(bad, models)


def test_each_crop_has_its_dominant_colour(models):
    spec = copy.deepcopy(TWO_STAGE)
    spec["steps"].append(step("dominant_color@v1", "colour", image="$steps.crop.crops"))
    spec["outputs"].append(
        {"type": "JsonField", "name": "colour", "selector": "$steps.colour.rgb_color"}
    )
    out = run(spec, models)
    expected = {"red": (255, 0, 0), "blue": (0, 0, 255)}
    assert out["colour"] == [expected[c["top"]] for c in out["classes"]]


def secrets_spec(*names: str) -> dict:
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [step("environment_secrets_store@v1", "vault",
                       variables_storing_secrets=list(names))],
        # A secret is never an output (tests/unit/test_workflow_bounds.py).
        "outputs": [{"type": "JsonField", "name": "image", "selector": "$inputs.image"}],
    }  # fmt: skip


def test_a_workflow_reads_only_the_secrets_the_server_lends(models, monkeypatch):
    monkeypatch.setenv("CAMERA_TOKEN", "t0k3n")
    monkeypatch.setenv("VISIONSTREAM_API_KEY", "the-servers-own")
    lent = Settings(workflow_secrets="CAMERA_TOKEN,VISIONSTREAM_API_KEY,MISSING_ONE")
    context = BuildContext(models, settings=lent)
    settings = SecretsSettings(variables_storing_secrets=["CAMERA_TOKEN", "MISSING_ONE"])
    vault = EnvironmentSecretsStoreBlock("vault", settings, context)
    assert vault.run({}, FrameState()) == {"camera_token": "t0k3n", "missing_one": None}
    for names in (["OTHER_TOKEN"], ["VISIONSTREAM_API_KEY"]):  # not lent; the server's own
        lent = "VISIONSTREAM_WORKFLOW_SECRETS"
        with pytest.raises(WorkflowCompilationError, match=lent) as caught:
            compile_workflow(parse_spec(secrets_spec(*names)), context)
        assert names[0] in str(caught.value)


def test_detections_transformation_runs_the_query_languages_operations(models):
    spec = copy.deepcopy(TWO_STAGE)
    operations = [
        {"type": "SortDetections", "mode": "center_x", "ascending": False},
        {"type": "DetectionsSelection", "mode": "first"},
    ]
    rightmost = step("detections_transformation@v1", "rightmost",
                     predictions="$steps.det.predictions", operations=operations)  # fmt: skip
    spec["steps"].append(rightmost)
    spec["outputs"].append(
        {"type": "JsonField", "name": "rightmost", "selector": "$steps.rightmost.predictions"}
    )
    out = run(spec, models)
    assert list(out["rightmost"].data["class_name"]) == ["cat"]  # the cat is right of the dog
