"""The reference's local VLM families (Qwen-VL, SmolVLM, Moondream, Florence-2) run on the
provider the operator maps each family to (``VISIONSTREAM_VLM_FAMILIES``), played on loopback:
the reference's outputs, from the pixels sent; an unmapped family is a 400 naming the
setting; Florence-2's boxes read back through ``vlm_as_detector`` as the reference's do."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.settings.language import ProviderSettings, VlmSettings
from tests.conftest import load_photo
from tests.support.blocks import run_frames


def settings_for(fake, tmp_path, **families: str) -> Settings:
    local = ProviderSettings(api="openai", base_url=fake.openai_url)
    return Settings(
        models_dir=tmp_path,
        allowed_networks="127.0.0.1/32",
        vlm=VlmSettings(providers={"local": local}, families=families),
    )


def run(steps: list[dict], settings: Settings, image: np.ndarray) -> dict:
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": steps,
        "outputs": [
            {"type": "JsonField", "name": s["name"], "selector": f"$steps.{s['name']}.*"}
            for s in steps
        ],
    }
    return run_frames(spec, settings, image)[0]


@pytest.fixture(scope="module")
def photo(photos) -> np.ndarray:
    return load_photo(photos, "person.jpg")


@pytest.mark.parametrize(
    ("type_id", "family"),
    [
        ("roboflow_core/qwen25vl@v1", "qwen-vl"),
        ("roboflow_core/qwen3_5vl@v2", "qwen-vl"),
        ("roboflow_core/smolvlm2@v1", "smolvlm"),
    ],
)
def test_a_family_answers_through_the_provider_it_is_mapped_to(
    vlm_provider, photo, tmp_path, type_id, family
):
    settings = settings_for(vlm_provider, tmp_path, **{family: "local:describe"})
    out = run([{"type": type_id, "name": "vlm", "images": "$inputs.image"}], settings, photo)
    (call,) = vlm_provider.calls
    assert call.model == "describe" and call.text == "Describe what's in this image."
    assert "1 person" in out["vlm"]["parsed_output"]


def test_an_unmapped_family_is_a_400_naming_the_setting(vlm_provider, tmp_path, photo):
    settings = settings_for(vlm_provider, tmp_path)
    step = {"type": "roboflow_core/moondream2@v1", "name": "m", "images": "$inputs.image"}
    with pytest.raises(WorkflowCompilationError, match=r"moondream .*VISIONSTREAM_VLM_FAMILIES"):
        run([step], settings, photo)


def test_moondream_finds_what_its_prompt_names(vlm_provider, photo, tmp_path, detector):
    settings = settings_for(vlm_provider, tmp_path, moondream="local:detect-normalized")
    step = {
        "type": "roboflow_core/moondream2@v1",
        "name": "m",
        "images": "$inputs.image",
        "prompt": "person",
    }
    found = run([step], settings, photo)["m"]["predictions"]
    expected = detector(vlm_provider.calls[0].images[0])
    assert len(found) == len(expected) > 0
    assert "Classes: person" in vlm_provider.calls[0].text


def test_florence_boxes_read_back_through_vlm_as_detector(vlm_provider, photo, tmp_path, detector):
    settings = settings_for(vlm_provider, tmp_path, **{"florence-2": "local:detect-normalized"})
    steps = [
        {
            "type": "roboflow_core/florence_2@v1",
            "name": "florence",
            "images": "$inputs.image",
            "task_type": "object-detection",
        },
        {
            "type": "roboflow_core/vlm_as_detector@v1",
            "name": "det",
            "image": "$inputs.image",
            "vlm_output": "$steps.florence.raw_output",
            "model_type": "florence-2",
            "task_type": "object-detection",
        },
    ]
    out = run(steps, settings, photo)
    parsed = out["florence"]["parsed_output"]
    assert json.loads(out["florence"]["raw_output"]) == parsed
    assert set(parsed) == {"bboxes", "labels"} and "person" in parsed["labels"]
    assert out["florence"]["classes"] == parsed["labels"]
    found, expected = out["det"]["predictions"], detector(vlm_provider.calls[0].images[0])
    assert out["det"]["error_status"] is False and len(found) == len(expected)
    assert np.abs(np.sort(found.xyxy[:, 0]) - np.sort(expected.xyxy[:, 0])).max() <= 8


def test_florence_text_tasks_answer_text_and_need_what_the_reference_needs(
    vlm_provider, photo, tmp_path
):
    settings = settings_for(vlm_provider, tmp_path, **{"florence-2": "local:describe"})
    step = {
        "type": "roboflow_core/florence_2@v2",
        "name": "f",
        "images": "$inputs.image",
        "task_type": "caption",
    }
    out = run([step], settings, photo)["f"]
    assert "1 person" in json.loads(out["raw_output"]) and out["parsed_output"] is None
    with pytest.raises(WorkflowCompilationError, match="`classes` parameter required"):
        run([{**step, "task_type": "open-vocabulary-object-detection"}], settings, photo)


def test_cosmos_answers_its_prompt_with_its_system_prompt(vlm_provider, photo, tmp_path):
    settings = settings_for(vlm_provider, tmp_path, cosmos="local:describe")
    step = {
        "type": "roboflow_core/cosmos3_edge@v1",
        "name": "cosmos",
        "images": "$inputs.image",
        "system_prompt": "You are a safety inspector.",
    }
    out = run([step], settings, photo)["cosmos"]
    (call,) = vlm_provider.calls
    assert call.text == "You are a safety inspector.\nDescribe what's in this image."
    assert "1 person" in out["output"] and out["error_message"] == ""


@pytest.mark.parametrize(
    ("fields", "asked"),
    [
        ({}, "Text Recognition:"),
        ({"task_type": "table-recognition"}, "Table Recognition:"),
        ({"task_type": "custom", "prompt": "Read the plate."}, "Read the plate."),
        (
            {"task_type": "structured-answering", "output_structure": {"who": "who is there"}},
            '"who": "who is there"',
        ),
    ],
)
def test_glm_ocr_asks_each_task_as_the_reference_does(vlm_provider, photo, tmp_path, fields, asked):
    settings = settings_for(vlm_provider, tmp_path, **{"glm-ocr": "local:describe"})
    step = {"type": "roboflow_core/glm_ocr@v1", "name": "ocr", "images": "$inputs.image", **fields}
    out = run([step], settings, photo)["ocr"]
    (call,) = vlm_provider.calls
    assert asked in call.text and "1 person" in out["parsed_output"]


def test_glm_ocr_structured_answering_needs_its_structure(vlm_provider, photo, tmp_path):
    settings = settings_for(vlm_provider, tmp_path, **{"glm-ocr": "local:describe"})
    step = {
        "type": "roboflow_core/glm_ocr@v1",
        "name": "ocr",
        "images": "$inputs.image",
        "task_type": "structured-answering",
    }
    with pytest.raises(WorkflowCompilationError, match="output_structure"):
        run([step], settings, photo)
