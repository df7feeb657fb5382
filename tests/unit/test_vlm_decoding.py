"""Reading a model's answer (``streaming.language.decoding``): the JSON in it however it is
wrapped, classifications, and one box per convention, each mapped back to the same pixels;
answers that do not read give nothing, never an exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.language import decoding
from streaming.language.decoding import CONVENTIONS, read_boxes

W, H = 640, 480
BOX = (64.0, 96.0, 320.0, 192.0)  # x1, y1, x2, y2 in pixels: 0.1-0.5 across, 0.2-0.4 down


def test_json_is_found_fenced_in_prose_as_a_sequence_and_around_a_stray_bracket():
    assert decoding.extract_json('{"a": 1}') == (False, {"a": 1})
    assert decoding.extract_json('Sure!\n```json\n{"a": 1}\n```\nBye') == (False, {"a": 1})
    assert decoding.extract_json("```\n[1, 2]\n```") == (False, [1, 2])
    assert decoding.extract_json('{"a": 1}, {"b": 2}]') == (False, [{"a": 1}, {"b": 2}])
    assert decoding.extract_json('{"a": 1}\n{"b": 2}') == (False, [{"a": 1}, {"b": 2}])
    assert decoding.extract_json('The answer is {"a": {"b": 2}} I think') == (
        False,
        {"a": {"b": 2}},
    )
    assert decoding.extract_json("no json here") == (True, {})
    assert decoding.extract_json(None) == (True, {})
    assert decoding.extract_json("[" * 100_000) == (True, {})


@given(st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_any_text_reads_or_fails_without_raising(text):
    error, payload = decoding.extract_json(text)
    assert isinstance(payload, dict | list)
    assert error or payload is not None
    decoding.classification(text, width=1, height=1, parent_id="p", classes=["a"], inference_id="i")
    decoding.loose_named_boxes(text)


def test_one_class_lists_every_class_and_an_unknown_one_at_minus_one():
    answer = json.dumps({"class_name": "wolf", "confidence": 1.7})
    found = decoding.classification(
        answer, width=W, height=H, parent_id="img", classes=["dog", "cat"], inference_id="x"
    )
    assert found == {
        "image": {"width": W, "height": H},
        "predictions": [
            {"class": "wolf", "class_id": -1, "confidence": 1.0},
            {"class": "dog", "class_id": 0, "confidence": 0.0},
            {"class": "cat", "class_id": 1, "confidence": 0.0},
        ],
        "top": "wolf",
        "confidence": 1.0,
        "inference_id": "x",
        "parent_id": "img",
    }


def test_several_classes_keep_each_ones_best_confidence_and_a_bare_list_reads_too():
    entries = [
        {"class": "cat", "confidence": 0.4},
        {"class": "cat", "confidence": 0.9},
        {"class": "owl", "confidence": 0.2},
    ]
    for answer in (json.dumps({"predicted_classes": entries}), json.dumps(entries)):
        found = decoding.classification(
            answer, width=W, height=H, parent_id="img", classes=["dog", "cat"], inference_id="x"
        )
        assert found is not None
        assert found["predicted_classes"] == ["cat", "owl"]
        assert found["predictions"] == {
            "dog": {"confidence": 0.0, "class_id": 0},
            "cat": {"confidence": 0.9, "class_id": 1},
            "owl": {"confidence": 0.2, "class_id": -1},
        }


@pytest.mark.parametrize("answer", ['{"foo": 1}', "prose", '[{"nolabel": 1}]', "[]"])
def test_an_answer_that_is_no_classification_gives_none(answer):
    assert (
        decoding.classification(
            answer, width=W, height=H, parent_id="p", classes=["a"], inference_id="i"
        )
        is None
    )


def entry_in(convention: str) -> dict:
    x1, y1, x2, y2 = BOX
    return {
        "normalized": {"x_min": x1 / W, "y_min": y1 / H, "x_max": x2 / W, "y_max": y2 / H},
        "named_1000": {
            "x_min": x1 * 1000 / W,
            "y_min": y1 * 1000 / H,
            "x_max": x2 * 1000 / W,
            "y_max": y2 * 1000 / H,
        },
        "absolute": {"box_2d": [x1, y1, x2, y2]},
        "yxyx_1000": {"box_2d": [y1 * 1000 / H, x1 * 1000 / W, y2 * 1000 / H, x2 * 1000 / W]},
        "xyxy_1000": {"bbox_2d": [x1 * 1000 / W, y1 * 1000 / H, x2 * 1000 / W, y2 * 1000 / H]},
        "percent": {"box_2d": [x1 * 100 / W, y1 * 100 / H, x2 * 100 / W, y2 * 100 / H]},
    }[convention]


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_each_convention_maps_its_box_back_to_the_same_pixels(convention):
    entry = {**entry_in(convention), "label": "dog"}
    (box,) = read_boxes([entry], CONVENTIONS[convention], W, H, ["cat", "dog"])
    assert box.xyxy == BOX
    assert (box.class_name, box.class_id, box.confidence) == ("dog", 1, 1.0)


def test_a_wrong_convention_reads_another_box_not_an_error():
    """Gemini's [y, x, y, x] read as Qwen's [x, y, x, y]: the box is wrong, visibly so, and
    nothing fails (the caller chose the convention)."""
    entry = {"box_2d": entry_in("yxyx_1000")["box_2d"], "label": "dog"}
    (box,) = read_boxes([entry], CONVENTIONS["xyxy_1000"], W, H, ["dog"])
    assert box.xyxy != BOX


def test_boxes_outside_the_image_are_clamped_and_entries_without_a_box_are_skipped():
    entries = [{"bbox_2d": [-50, -1, 1200, 500], "label": "x"}, {"label": "no box"}]
    (box,) = read_boxes({"detections": entries}, CONVENTIONS["xyxy_1000"], W, H, [])
    assert box.xyxy == (0.0, 0.0, float(W), 240.0)
    assert box.class_id == -1
    with pytest.raises(ValueError, match="without a box"):
        read_boxes(entries, CONVENTIONS["xyxy_1000"], W, H, [], skip_malformed=False)


def test_absolute_boxes_are_on_the_image_as_it_was_uploaded():
    """OpenAI's newest blocks upload at most 2048 px on a side: a 4096-wide frame's boxes
    come back at half scale and are doubled."""
    convert = decoding.absolute(decoding.max_edge_size(2048))
    assert convert({"box_2d": [10, 20, 30, 40]}, 4096, 1024) == [20.0, 40.0, 60.0, 80.0]
    assert decoding.anthropic_upload_size(640, 480) == (640, 480)
    width, height = decoding.anthropic_upload_size(4000, 3000)
    assert width * height <= 4784 * 28 * 28 and abs(width / height - 4 / 3) < 0.01


def test_a_cut_off_answer_keeps_its_complete_named_boxes():
    cut = '[{"label": "a", "x_min": 1, "y_min": 2, "x_max": 3, "y_max": 4}, {"label": "b", "x_'
    assert decoding.loose_named_boxes(cut + "]garbage{") == [
        {"label": "a", "x_min": 1, "y_min": 2, "x_max": 3, "y_max": 4}
    ]
