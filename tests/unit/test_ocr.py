"""Reading text with the PP-OCRv4 model ``visionstream models pull pp-ocrv4`` fetches, on
text rendered here: alone, in workflows on the frame and on each crop of a detector's boxes
(one recognition run per frame), and stitched into lines the way the reference's
``stitch_ocr_detections`` does."""

from __future__ import annotations

import shutil

import cv2
import numpy as np
import pytest
import supervision as sv

from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.inference.ocr import TextReader, ctc_decode
from streaming.inference.registry import ModelRegistry
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from streaming.workflows.blocks.text_stitching import stitched
from streaming.workflows.serialization import serialize_value
from tests.support.onnx_models import YOLO_ROWS, model_directory

DOG_BOX, CAT_BOX = (150, 180, 250, 300), (360, 360, 440, 440)  # the fixed detector's, 640x640


def render(text: str, size: tuple[int, int] = (320, 80), scale: float = 1.4) -> np.ndarray:
    """Black text on white, ``size`` is width, height."""
    image = np.full((size[1], size[0], 3), 255, np.uint8)
    (w, h), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, 3)
    origin = ((size[0] - w) // 2, (size[1] + h) // 2)
    cv2.putText(image, text, origin, cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), 3)
    return image


def labelled_scene() -> np.ndarray:
    """640x640 white, with a word inside each of the fixed detector's two boxes."""
    image = np.full((640, 640, 3), 255, np.uint8)
    for (x1, y1, x2, y2), text in ((DOG_BOX, "AB"), (CAT_BOX, "42")):
        image[y1:y2, x1:x2] = render(text, (x2 - x1, y2 - y1), 1.3)
    return image


@pytest.fixture(scope="module")
def models(tmp_path_factory, ocr_model_files):
    root = tmp_path_factory.mktemp("models")
    shutil.copytree(ocr_model_files, root / ocr_model_files.name)
    model_directory(root, "boxes", [("output", YOLO_ROWS)], decoder="yolov3")
    # Batches of up to 32 (a GPU's; on a CPU the default is a region per run).
    registry = ModelRegistry(Settings(models_dir=root, max_batch_size=32))
    yield registry
    registry.close()


def run(spec: dict, models: ModelRegistry, image: np.ndarray) -> dict:
    workflow = compile_workflow(parse_spec(spec), BuildContext(models))
    try:
        return workflow.run(image, {}, FrameState())
    finally:
        workflow.close()


def workflow(*steps: dict, outputs: dict[str, str]) -> dict:
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": list(steps),
        "outputs": [{"type": "JsonField", "name": n, "selector": s} for n, s in outputs.items()],
    }


def test_the_reader_reads_rendered_lines_in_reading_order(models):
    reader = models.get("pp-ocrv4")
    assert isinstance(reader, TextReader)
    page = np.full((260, 640, 3), 255, np.uint8)
    page[20:100, 40:360] = render("HELLO WORLD")
    page[150:230, 200:520] = render("ABC 1234")
    lines = reader.read_many([page, render("KX 42 ZR")])
    assert [line.text for line in lines[0]] == ["HELLO WORLD", "ABC 1234"]
    assert [line.text for line in lines[1]] == ["KX 42 ZR"]
    first = lines[0][0]
    assert 40 <= first.xyxy[0] < first.xyxy[2] <= 360 and 20 <= first.xyxy[1] < 100
    assert all(0.8 < line.confidence <= 1.0 for found in lines for line in found)


def test_text_upside_down_is_turned_before_it_is_read(models):
    reader = models.get("pp-ocrv4")
    upside_down = np.ascontiguousarray(np.rot90(render("KX 42 ZR"), 2))
    assert [line.text for line in reader.read_many([upside_down])[0]] == ["KX 42 ZR"]


def test_blank_and_tiny_images_have_no_text(models):
    reader = models.get("pp-ocrv4")
    blank = np.full((100, 200, 3), 255, np.uint8)
    assert reader.read_many([blank, np.zeros((1, 5, 3), np.uint8)]) == [[], []]


def test_ctc_drops_blanks_and_repeats_and_adds_the_trailing_space():
    charset = ["a", "b"]  # classes: 0 blank, 1 a, 2 b, 3 space
    columns = [1, 1, 0, 1, 2, 3, 2, 2]
    probabilities = np.eye(4)[columns] * 0.9
    assert ctc_decode(probabilities, charset) == ("aab b", pytest.approx(0.9))
    assert ctc_decode(np.eye(4)[[0, 0]], charset) == ("", 0.0)


def test_ocr_model_block_on_the_frame(models):
    spec = workflow(
        {"type": "roboflow_core/ocr_model@v1", "name": "ocr", "images": "$inputs.image"},
        outputs={"text": "$steps.ocr.result", "boxes": "$steps.ocr.predictions",
                 "kind": "$steps.ocr.prediction_type"},
    )  # fmt: skip
    out = run(spec, models, render("PARKING 24"))
    assert out["text"] == "PARKING 24" and out["kind"] == "ocr"
    boxes = serialize_value(out["boxes"], 80, None)
    assert [p["class"] for p in boxes["predictions"]] == ["PARKING 24"]


def test_text_on_each_detection_read_in_one_recognition_run(models, monkeypatch):
    """The two-stage pattern: detect, crop each box, read each crop, one list per frame."""
    reader = models.get("pp-ocrv4")
    runs: list[int] = []
    recognise = reader.recogniser.run
    monkeypatch.setattr(reader.recogniser, "run", lambda b: runs.append(len(b)) or recognise(b))
    spec = workflow(
        {"type": "roboflow_core/roboflow_object_detection_model@v2", "name": "det",
         "images": "$inputs.image", "model_id": "boxes"},
        {"type": "roboflow_core/dynamic_crop@v1", "name": "crop", "images": "$inputs.image",
         "predictions": "$steps.det.predictions"},
        {"type": "roboflow_core/pp_ocr@v1", "name": "ocr", "images": "$steps.crop.crops",
         "text_detection": "none"},
        {"type": "roboflow_core/detections_classes_replacement@v1", "name": "named",
         "object_detection_predictions": "$steps.det.predictions",
         "classification_predictions": "$steps.ocr.result"},
        outputs={"texts": "$steps.ocr.result", "parents": "$steps.ocr.parent_id",
                 "detections": "$steps.det.predictions"},
    )  # fmt: skip
    out = run(spec, models, labelled_scene())
    detections = out["detections"]
    where = {str(i): tuple(int(v) for v in box) for i, box in
             zip(detections.data["detection_id"], detections.xyxy, strict=True)}  # fmt: skip
    read = {where[p]: t for p, t in zip(out["parents"], out["texts"], strict=True)}
    assert read == {DOG_BOX: "AB", CAT_BOX: "42"}
    assert runs == [2]  # both crops in one recognition run


def test_pp_ocr_without_recognition_finds_where_text_is(models):
    spec = workflow(
        {"type": "roboflow_core/pp_ocr@v1", "name": "ocr", "images": "$inputs.image",
         "text_recognition": "none"},
        outputs={"boxes": "$steps.ocr.predictions", "text": "$steps.ocr.result"},
    )  # fmt: skip
    page = np.full((200, 640, 3), 255, np.uint8)
    page[60:140, 160:480] = render("HELLO")
    out = run(spec, models, page)
    assert out["text"] == "" and len(out["boxes"]) == 1
    x1, y1, x2, y2 = out["boxes"].xyxy[0]
    assert 160 <= x1 < x2 <= 480 and 60 <= y1 < y2 <= 140


def test_pp_ocr_refuses_to_do_nothing_and_ocr_ids_resolve_to_ours(models):
    spec = workflow(
        {"type": "roboflow_core/pp_ocr@v1", "name": "ocr", "images": "$inputs.image",
         "text_detection": "none", "text_recognition": "none"},
        outputs={"text": "$steps.ocr.result"},
    )  # fmt: skip
    with pytest.raises(WorkflowCompilationError, match="step 'ocr': text_detection and"):
        run(spec, models, render("X"))
    spec["steps"][0]["text_detection"] = "huge"
    with pytest.raises(WorkflowCompilationError, match="text_detection must be one of"):
        run(spec, models, render("X"))
    for reference_id in ("doctr/default", "pp_ocr/small-small", "pp_ocr/tiny-tiny"):
        assert models.resolve(reference_id) == "pp-ocrv4"


def test_an_ocr_step_without_the_model_says_how_to_get_it(tmp_path):
    registry = ModelRegistry(Settings(models_dir=tmp_path))
    spec = workflow(
        {"type": "roboflow_core/ocr_model@v1", "name": "ocr", "images": "$inputs.image"},
        outputs={"text": "$steps.ocr.result"},
    )
    with pytest.raises(WorkflowCompilationError, match="visionstream models pull pp-ocrv4"):
        run(spec, registry, render("X"))


def words(*placed: tuple[str, tuple[int, int, int, int]]) -> sv.Detections:
    xyxy = np.array([box for _, box in placed], float).reshape(-1, 4)
    detections = sv.Detections(xyxy=xyxy, class_id=np.zeros(len(placed), int))
    detections.data["class_name"] = np.array([text for text, _ in placed])
    return detections


def test_stitching_by_tolerance_reads_lines_in_each_direction():
    page = words(("world", (60, 12, 100, 30)), ("hello", (0, 10, 50, 30)),
                 ("again", (0, 50, 50, 70)))  # fmt: skip
    assert stitched(page, "tolerance", "left_to_right", " ", 10) == "hello world \n again"
    assert stitched(page, "tolerance", "left_to_right", "", 10) == "helloworld\nagain"
    assert stitched(page, "tolerance", "right_to_left", "", 10) == "worldhello\nagain"
    column = words(("b", (0, 40, 20, 70)), ("a", (0, 0, 20, 30)), ("c", (40, 0, 60, 30)))
    assert stitched(column, "tolerance", "auto", "", 10) == "ab c"  # taller than wide
    assert stitched(column, "tolerance", "vertical_bottom_to_top", "", 10) == "c ba"
    assert stitched(words(), "tolerance", "auto", "", 10) == ""


def test_stitching_by_otsu_splits_characters_into_words():
    # Characters 10 wide, 2 apart inside a word, 14 apart between words, on two lines.
    def chars(text: str, y: int) -> list[tuple[str, tuple[int, int, int, int]]]:
        out, x = [], 0
        for c in text:
            if c == " ":
                x += 12
                continue
            out.append((c, (x, y, x + 10, y + 20)))
            x += 12
        return out

    page = words(*chars("AB CD", 0), *chars("EF", 40))
    assert stitched(page, "otsu", "left_to_right", "", 10) == "AB CD\nEF"
    evenly = words(*chars("ABCD", 0))  # one kind of gap: one word
    assert stitched(evenly, "otsu", "left_to_right", "", 10) == "ABCD"


def test_stitching_by_collimation_follows_a_skewed_line():
    # A line that drifts down by 8 pixels a word: tolerance rounding would cut it.
    skewed = words(("one", (0, 0, 40, 20)), ("two", (50, 8, 90, 28)),
                   ("three", (100, 16, 140, 36)), ("below", (0, 80, 40, 100)))  # fmt: skip
    assert stitched(skewed, "collimate", "left_to_right", " ", 10, collimate_tolerance=4) == (
        "one two three\nbelow"
    )


def test_stitch_blocks_check_their_fields(models):
    def stitch(**fields) -> dict:
        return workflow(
            {"type": "roboflow_core/ocr_model@v1", "name": "ocr", "images": "$inputs.image"},
            {"type": "roboflow_core/stitch_ocr_detections@v2", "name": "stitch",
             "predictions": "$steps.ocr.predictions", **fields},
            outputs={"text": "$steps.stitch.ocr_text"},
        )  # fmt: skip

    assert run(stitch(), models, render("OPEN"))["text"] == "OPEN"
    for fields, message in (
        ({"tolerance": 0}, "tolerance must be"),
        ({"stitching_algorithm": "magic"}, "stitching_algorithm must be one of"),
        ({"otsu_threshold_multiplier": 0}, "otsu_threshold_multiplier must be"),
        ({"reading_direction": "up"}, "reading_direction must be one of"),
    ):
        with pytest.raises(WorkflowCompilationError, match=message):
            run(stitch(**fields), models, render("X"))
    v1 = stitch()
    v1["steps"][1]["type"] = "roboflow_core/stitch_ocr_detections@v1"
    with pytest.raises(WorkflowCompilationError, match="reading_direction"):
        run(v1, models, render("X"))  # v1 has no default direction
