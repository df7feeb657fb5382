"""The VLM blocks (``openai_compatible``, ``vlm_as_classifier``, ``vlm_as_detector``) in
compiled workflows, against the provider played on loopback, which answers from the pixels
it was sent by running the default model: the answer names what is in the frame, the
classification's top class is the detector's best, and boxes in every convention come back
where the detector found them. Bad answers are ``error_status``, never a failed run; in a live
stream the frame never waits for the model."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from streaming.config import Settings
from streaming.inference.registry import ModelRegistry
from streaming.language import Providers
from streaming.settings.language import VlmSettings
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks import language as language_blocks
from streaming.workflows.blocks.base import BuildContext, FrameState
from tests.conftest import load_photo
from tests.support.blocks import run_frames

ASK = "roboflow_core/openai_compatible@v1"


def asking(model: str, prompt: str = "What is here? {{ $parameters.picture }}", **fields) -> dict:
    return {
        "type": ASK,
        "name": "vlm",
        "base_url": "$inputs.base_url",
        "model_name": model,
        "prompt": prompt,
        "prompt_parameters": {"picture": "$inputs.image", "where": "$inputs.where"},
        **fields,
    }


def spec_of(*steps: dict, outputs: dict[str, str]) -> dict:
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "base_url"},
            {"type": "WorkflowParameter", "name": "where", "default_value": "the yard"},
        ],
        "steps": list(steps),
        "outputs": [{"type": "JsonField", "name": k, "selector": v} for k, v in outputs.items()],
    }


class WatchedExecutor(ThreadPoolExecutor):
    """The live steps' threads, real ones, telling when a question they took is done."""

    def __init__(self) -> None:
        super().__init__(4, thread_name_prefix="vlm-test")
        self._done = 0
        self._changed = threading.Condition()

    def submit(self, fn, /, *args, **kwargs):
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future) -> None:
        with self._changed:
            self._done += 1
            self._changed.notify_all()

    def wait_done(self, count: int, timeout: float = 60.0) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self._done >= count, timeout), self._done


def settings_for(tmp_path, **vlm) -> Settings:
    return Settings(models_dir=tmp_path, allowed_networks="127.0.0.1/32", vlm=VlmSettings(**vlm))


def run(spec: dict, settings: Settings, image: np.ndarray, **given) -> list[dict]:
    return run_frames(spec, settings, image, **given)


@pytest.fixture(scope="module")
def photo(photos) -> np.ndarray:
    return load_photo(photos, "person.jpg")


def test_the_prompt_goes_with_its_parameters_and_the_image_travels_as_an_image(
    vlm_provider, photo, tmp_path
):
    spec = spec_of(
        asking("describe", prompt="In {{ $parameters.where }}: {{ $parameters.picture }} what?"),
        outputs={"text": "$steps.vlm.output", "error": "$steps.vlm.error_status"},
    )
    (result,) = run(spec, settings_for(tmp_path), photo, base_url=vlm_provider.openai_url)
    (call,) = vlm_provider.calls
    assert call.text == "In the yard:  what?"
    assert [i.shape for i in call.images] == [photo.shape]
    assert result["error"] == ""
    assert "1 person" in result["text"] and "horse" in result["text"]


@pytest.mark.parametrize("model", ["classify", "fenced-classify", "reasoning-classify"])
def test_an_answer_becomes_a_classification_however_it_is_wrapped(
    vlm_provider, photo, tmp_path, model
):
    spec = spec_of(
        asking(model),
        {
            "type": "roboflow_core/vlm_as_classifier@v2",
            "name": "cls",
            "image": "$inputs.image",
            "vlm_output": "$steps.vlm.output",
            "classes": ["dog", "person", "horse"],
        },
        outputs={"cls": "$steps.cls.*"},
    )
    (result,) = run(spec, settings_for(tmp_path), photo, base_url=vlm_provider.openai_url)
    found = result["cls"]
    assert found["error_status"] is False
    top = found["predictions"]["top"]
    assert top in ("dog", "person", "horse")  # the detector's most confident on the photo
    assert [p["class"] for p in found["predictions"]["predictions"]] == ["dog", "person", "horse"]
    assert found["predictions"]["image"] == {"width": 640, "height": 480}


def test_a_multi_label_answer_lists_each_class_seen(vlm_provider, photo, tmp_path):
    spec = spec_of(
        asking("multilabel"),
        {
            "type": "roboflow_core/vlm_as_classifier@v1",
            "name": "cls",
            "image": "$inputs.image",
            "vlm_output": "$steps.vlm.output",
            "classes": ["person", "cat"],
        },
        outputs={"cls": "$steps.cls.predictions"},
    )
    (result,) = run(spec, settings_for(tmp_path), photo, base_url=vlm_provider.openai_url)
    found = result["cls"]
    assert {"person", "horse"} <= set(found["predicted_classes"])
    assert found["predictions"]["cat"] == {"confidence": 0.0, "class_id": 1}
    assert found["predictions"]["horse"]["class_id"] == -1


CONVENTION_OF = {
    ("openai", "normalized"): "roboflow_core/vlm_as_detector@v2",
    ("openai", "absolute"): "roboflow_core/vlm_as_detector@v2",
    ("anthropic-claude", "absolute"): "roboflow_core/vlm_as_detector@v2",
    ("google-gemini", "yxyx_1000"): "roboflow_core/vlm_as_detector@v1",
    ("anthropic-claude", "normalized"): "roboflow_core/vlm_as_detector@v1",
    ("qwen", "xyxy_1000"): "roboflow_core/vlm_as_detector@v2",
    ("zai-flash", "xyxy_1000"): "roboflow_core/vlm_as_detector@v2",
    ("muse", "named_1000"): "roboflow_core/vlm_as_detector@v2",
    ("spacexai", "percent"): "roboflow_core/vlm_as_detector@v2",
}


@pytest.mark.parametrize(("model_type", "convention"), sorted(CONVENTION_OF))
def test_boxes_in_each_convention_come_back_where_the_detector_found_them(
    vlm_provider, photo, tmp_path, detector, model_type, convention
):
    spec = spec_of(
        asking(f"fenced-detect-{convention}"),
        {
            "type": CONVENTION_OF[(model_type, convention)],
            "name": "det",
            "image": "$inputs.image",
            "vlm_output": "$steps.vlm.output",
            "classes": ["person", "dog"],
            "model_type": model_type,
            "task_type": "object-detection",
        },
        outputs={"det": "$steps.det.predictions", "error": "$steps.det.error_status"},
    )
    (result,) = run(spec, settings_for(tmp_path), photo, base_url=vlm_provider.openai_url)
    assert result["error"] is False
    found = result["det"]
    expected = detector(vlm_provider.calls[0].images[0])  # what the model saw
    assert len(found) == len(expected) > 0
    order = np.argsort(expected.xyxy[:, 0])
    assert np.abs(found.xyxy[np.argsort(found.xyxy[:, 0])] - expected.xyxy[order]).max() <= 8
    names = list(found.data["class_name"])
    ids = dict(zip(names, found.class_id.tolist(), strict=True))
    assert ids["person"] == 0 and ids.get("horse", -1) == -1  # horse: not among the classes
    assert len(set(found.data["detection_id"])) == len(found)


@pytest.mark.parametrize("model", ["prose", "text-only"])
def test_a_bad_answer_or_a_refusal_is_an_error_status_not_a_failed_run(
    vlm_provider, photo, tmp_path, model
):
    spec = spec_of(
        asking(model),
        {
            "type": "roboflow_core/vlm_as_detector@v2",
            "name": "det",
            "image": "$inputs.image",
            "vlm_output": "$steps.vlm.output",
            "classes": ["person"],
            "model_type": "openai",
            "task_type": "object-detection",
        },
        outputs={"vlm": "$steps.vlm.*", "det": "$steps.det.*"},
    )
    (result,) = run(spec, settings_for(tmp_path), photo, base_url=vlm_provider.openai_url)
    assert result["det"]["error_status"] is True and result["det"]["predictions"] is None
    if model == "text-only":
        assert result["vlm"]["output"] == ""
        assert "model does not support images" in result["vlm"]["error_status"]


def test_a_base_url_outside_the_egress_policy_is_an_error_and_nothing_is_sent(
    vlm_provider, photo, tmp_path
):
    spec = spec_of(asking("describe"), outputs={"vlm": "$steps.vlm.*"})
    settings = settings_for(tmp_path).model_copy(update={"allowed_networks": ["10.0.0.0/8"]})
    (result,) = run(spec, settings, photo, base_url=vlm_provider.openai_url)
    assert "VISIONSTREAM_ALLOWED_NETWORKS" in result["vlm"]["error_status"]
    (result,) = run(spec, settings, photo, base_url="ftp://127.0.0.1/v1")
    assert "http(s) URL" in result["vlm"]["error_status"]
    assert vlm_provider.calls == []


def test_in_a_live_stream_frames_never_wait_and_carry_the_last_answer_with_its_age(
    vlm_provider, photo, tmp_path
):
    """The provider takes 3 s an answer: frames go on at once, with no answer first, then
    with the answer and its growing age; one question at a time."""
    vlm_provider.delay_s = 3.0
    spec = spec_of(asking("describe"), outputs={"vlm": "$steps.vlm.*"})
    settings = settings_for(tmp_path, live_min_interval_s=0.0)
    asking_threads = WatchedExecutor()
    providers = Providers(settings.vlm, pin=None, executor=asking_threads)
    registry = ModelRegistry(settings)
    context = BuildContext(registry, settings=settings, live=True, language=providers)
    workflow = compile_workflow(
        parse_spec(spec), context, parameters={"base_url": vlm_provider.openai_url}
    )
    try:
        started = time.monotonic()
        first = workflow.run(photo, {}, FrameState())["vlm"]
        assert time.monotonic() - started < 1.0  # the frame did not wait for the model
        assert first["output"] == "" and "in flight" in first["error_status"]
        asking_threads.wait_done(1)
        outputs = workflow.run(photo, {}, FrameState())["vlm"]  # asks again, 3 s
        assert "1 person" in outputs["output"] and outputs["error_status"] == ""
        later = workflow.run(photo, {}, FrameState())["vlm"]
        assert later["output"] == outputs["output"]
        assert later["answer_age_s"] >= outputs["answer_age_s"]
        assert vlm_provider.peak == 1
    finally:
        workflow.close()
        providers.close()
        registry.close()


def test_a_live_step_asks_at_most_once_per_interval_whatever_the_frame_rate(
    vlm_provider, photo, tmp_path, monkeypatch
):
    """``VISIONSTREAM_VLM_LIVE_MIN_INTERVAL_S``: answered at once, the step still waits out the
    interval before its next question, and encodes no frame it sends no question for."""
    spec = spec_of(asking("describe"), outputs={"vlm": "$steps.vlm.*"})
    settings = settings_for(tmp_path, live_min_interval_s=3600.0)
    asking_threads = WatchedExecutor()
    providers = Providers(settings.vlm, pin=None, executor=asking_threads)
    registry = ModelRegistry(settings)
    context = BuildContext(registry, settings=settings, live=True, language=providers)
    workflow = compile_workflow(
        parse_spec(spec), context, parameters={"base_url": vlm_provider.openai_url}
    )
    try:
        workflow.run(photo, {}, FrameState())
        asking_threads.wait_done(1)
        assert workflow.run(photo, {}, FrameState())["vlm"]["output"]
        encoded = []
        real_jpeg = language_blocks.jpeg
        monkeypatch.setattr(  # counted, still encoded
            language_blocks, "jpeg", lambda image: encoded.append(1) or real_jpeg(image)
        )
        for _ in range(20):
            workflow.run(photo, {}, FrameState())
        assert encoded == []
    finally:
        workflow.close()
        providers.close()
        registry.close()
    assert len(vlm_provider.calls) == 1
