"""The reference's cloud VLM blocks (``open_ai``, ``anthropic_claude``, ``google_gemini``,
``llama_vision``, ``openrouter``, every version) against the provider played on loopback,
configured under each cloud's name as an operator points a cloud at a local server: each
speaks its API, sends the frame, asks its task's question; the newest versions read the
answer into predictions; a Roboflow proxy key or a missing one is a 400 naming the setting."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.inference.registry import ModelRegistry
from streaming.language import Providers
from streaming.settings.language import ProviderSettings, VlmSettings
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks import BLOCKS
from streaming.workflows.blocks.base import BuildContext
from streaming.workflows.blocks.vlm_versions import VERSIONS
from tests.conftest import load_photo
from tests.support.blocks import run_frames

API_OF = {"openai": "openai", "anthropic": "anthropic", "gemini": "gemini", "openrouter": "openai"}


def settings_for(
    fake, tmp_path, model: str, clouds=("openai", "anthropic", "gemini", "openrouter")
):
    urls = {"openai": fake.openai_url, "anthropic": fake.anthropic_url, "gemini": fake.gemini_url}
    providers = {
        cloud: ProviderSettings(
            api=API_OF[cloud], base_url=urls[API_OF[cloud]], model=model, api_key="local-key"
        )
        for cloud in clouds
    }
    return Settings(
        models_dir=tmp_path,
        allowed_networks="127.0.0.1/32",
        vlm=VlmSettings(providers=providers),
    )


def spec_of(step: dict) -> dict:
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [{"name": "vlm", "images": "$inputs.image", **step}],
        "outputs": [{"type": "JsonField", "name": "vlm", "selector": "$steps.vlm.*"}],
    }


def run(spec: dict, settings: Settings, image: np.ndarray) -> dict:
    return run_frames(spec, settings, image)[0]["vlm"]


@pytest.fixture(scope="module")
def photo(photos) -> np.ndarray:
    return load_photo(photos, "person.jpg")


def type_of(version: str) -> str:
    return VERSIONS[version].type_ids[0]


def needed(version: str) -> dict:
    """What a step of this version must be given besides the task."""
    v = VERSIONS[version]
    given = {"model_id": "any/model"} if v.model[0] == "model_id" else {}
    if v.key is not None and v.key[1] is not None and not str(v.key[1]).startswith("rf_"):
        given[v.key[0]] = "sk-step-key"
    return given


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_every_version_asks_its_cloud_with_the_frame_and_answers_from_it(
    vlm_provider, photo, tmp_path, version
):
    step = {
        "type": type_of(version),
        "task_type": "caption",
        "classes": ["person", "horse"],
        **needed(version),
    }
    outputs = run(spec_of(step), settings_for(vlm_provider, tmp_path, "describe"), photo)
    (call,) = vlm_provider.calls
    assert call.api == API_OF[VERSIONS[version].cloud]
    assert call.key == "local-key"  # the provider's own key: the step's is for the cloud
    assert call.images[0].shape[:2] in ((480, 640), (768, 1024))
    assert "1 person" in outputs["output"] and outputs["error_message"] == ""
    assert outputs["classes"] == ["person", "horse"]
    assert "describe the image" in call.text.lower()


@pytest.mark.parametrize(
    ("version", "model"),
    [("OpenAIV7", "classify"), ("ClaudeV5", "fenced-classify"), ("GeminiV6", "classify")],
)
def test_the_newest_versions_read_a_classification_into_predictions(
    vlm_provider, photo, tmp_path, version, model
):
    step = {"type": type_of(version), "task_type": "classification", "classes": ["person", "dog"]}
    outputs = run(spec_of(step), settings_for(vlm_provider, tmp_path, model), photo)
    assert outputs["error_status"] is False
    assert outputs["predictions"]["top"] in ("person", "dog", "horse")
    assert "Classes: person, dog" in vlm_provider.calls[0].text


@pytest.mark.parametrize(
    ("version", "model"),
    [
        ("OpenAIV7", "detect-normalized"),
        ("ClaudeV5", "fenced-detect-normalized"),
        ("GeminiV6", "detect-yxyx_1000"),
        ("OpenRouterV3", "detect-normalized"),
    ],
)
def test_the_newest_versions_read_detections_where_the_detector_found_them(
    vlm_provider, photo, tmp_path, detector, version, model
):
    step = {
        "type": type_of(version),
        "task_type": "object-detection",
        "classes": ["person", "dog", "horse"],
        **needed(version),
    }
    outputs = run(spec_of(step), settings_for(vlm_provider, tmp_path, model), photo)
    assert outputs["error_status"] is False
    found, expected = outputs["predictions"], detector(vlm_provider.calls[0].images[0])
    assert len(found) == len(expected) > 0
    left = np.sort(found.xyxy[:, 0])
    assert np.abs(left - np.sort(expected.xyxy[:, 0])).max() <= 8


def test_an_answer_that_does_not_read_is_an_error_status(vlm_provider, photo, tmp_path):
    step = {"type": type_of("OpenAIV7"), "task_type": "classification", "classes": ["a"]}
    outputs = run(spec_of(step), settings_for(vlm_provider, tmp_path, "prose"), photo)
    assert outputs["error_status"] is True and outputs["predictions"] is None
    assert outputs["output"] == "I would rather not answer in JSON today."


def test_a_provider_that_refuses_is_an_error_message_not_a_failed_run(
    vlm_provider, photo, tmp_path
):
    step = {"type": type_of("GeminiV3"), "task_type": "ocr"}
    outputs = run(spec_of(step), settings_for(vlm_provider, tmp_path, "text-only"), photo)
    assert outputs["output"] == ""
    assert "model does not support images" in outputs["error_message"]


def test_claude_steps_shrink_the_image_to_max_image_size(vlm_provider, photo, tmp_path):
    step = {"type": type_of("ClaudeV3"), "task_type": "caption", "max_image_size": 320}
    run(spec_of(step), settings_for(vlm_provider, tmp_path, "describe"), photo)
    assert vlm_provider.calls[0].images[0].shape[:2] == (240, 320)


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"task_type": "classification"}, "`classes` parameter required to be set for task"),
        ({"task_type": "unconstrained"}, "`prompt` parameter required to be set for task"),
        ({"task_type": "structured-answering"}, "`output_structure` parameter required"),
        ({"task_type": "object-detection", "classes": ["a"]}, "task_type must be one of"),
    ],
)
def test_a_task_without_what_it_needs_is_refused_when_compiled(tmp_path, step, message):
    spec = spec_of({"type": "roboflow_core/open_ai@v3", **step})
    settings = Settings(models_dir=tmp_path)
    with pytest.raises(WorkflowCompilationError, match=message):
        compile_workflow(parse_spec(spec), BuildContext(ModelRegistry(settings), settings=settings))


def test_a_roboflow_proxy_key_or_none_without_a_provider_is_a_400_naming_the_setting(
    vlm_provider, photo, tmp_path
):
    settings = settings_for(vlm_provider, tmp_path, "describe", clouds=())
    proxied = {"type": "roboflow_core/open_ai@v4", "task_type": "caption"}  # rf_key:account
    refused = r"Roboflow key .*VISIONSTREAM_VLM_PROVIDERS"
    with pytest.raises(WorkflowCompilationError, match=refused):
        run(spec_of(proxied), settings, photo)
    keyless = {
        "type": "roboflow_core/openrouter@v1",
        "task_type": "caption",
        "model_id": "m",
        "api_key": None,
    }
    with pytest.raises(WorkflowCompilationError, match=r"no api_key.*provider 'openrouter'"):
        run(spec_of(keyless), settings, photo)
    assert vlm_provider.calls == []


def test_a_steps_own_key_reaches_the_clouds_own_url():
    providers = Providers(VlmSettings(), pin=None)
    try:
        client = providers.cloud("gemini", "step", "AIza-own-key")
        assert client.url == "https://generativelanguage.googleapis.com/v1beta"
        assert providers.cloud("openrouter", "s", "k").url == "https://openrouter.ai/api/v1"
    finally:
        providers.close()


def test_every_cloud_type_id_of_the_reference_is_registered():
    for type_id in (
        *(f"roboflow_core/open_ai@v{v}" for v in range(2, 8)),
        *(f"roboflow_core/anthropic_claude@v{v}" for v in range(1, 6)),
        *(f"roboflow_core/google_gemini@v{v}" for v in range(1, 7)),
        "roboflow_core/llama_3_2_vision@v1",
        "roboflow_core/llama_vision@v2",
        *(f"roboflow_core/openrouter@v{v}" for v in range(1, 4)),
        *(f"roboflow_core/google_gemma@v{v}" for v in range(1, 5)),
        *(f"roboflow_core/kimi_openrouter@v{v}" for v in range(1, 4)),
        "roboflow_core/qwen3_5_openrouter@v1",
        "roboflow_core/qwen3_6_openrouter@v1",
    ):
        assert type_id in BLOCKS, type_id


@pytest.mark.parametrize(
    ("type_id", "model"),
    [
        ("roboflow_core/google_gemma@v1", "google/gemma-4-31b-it"),
        ("roboflow_core/kimi_openrouter@v2", "moonshotai/kimi-k2.6"),
        ("roboflow_core/qwen3_6_openrouter@v1", "qwen/qwen3.6-35b-a3b"),
        ("roboflow_core/openrouter@v1", "any/model"),
    ],
)
def test_an_openrouter_step_asks_for_the_model_its_label_names_there(
    vlm_provider, photo, tmp_path, type_id, model
):
    """The provider named ``openrouter`` names no model: the step's label is asked for as
    OpenRouter knows it, at the reference's temperature (0.1)."""
    router = ProviderSettings(api="openai", base_url=vlm_provider.openai_url, api_key="k")
    settings = Settings(
        models_dir=tmp_path,
        allowed_networks="127.0.0.1/32",
        vlm=VlmSettings(providers={"openrouter": router}),
    )
    step = {"type": type_id, "task_type": "caption", "api_key": "sk-own", "model_id": "any/model"}
    run(spec_of(step), settings, photo)
    (call,) = vlm_provider.calls
    assert call.model == model and call.body["temperature"] == 0.1


def test_an_openrouter_step_with_its_own_key_needs_no_provider(tmp_path):
    """Its key is the caller's: it compiles to reach OpenRouter itself (not reached here:
    the suite's traffic stays on loopback)."""
    settings = Settings(models_dir=tmp_path, allowed_networks="127.0.0.1/32")
    step = {
        "type": "roboflow_core/openrouter@v2",
        "task_type": "caption",
        "model_id": "m",
        "api_key": "sk-or-own",
    }
    registry = ModelRegistry(settings)
    try:
        workflow = compile_workflow(
            parse_spec(spec_of(step)), BuildContext(registry, settings=settings)
        )
        workflow.close()
    finally:
        registry.close()


@pytest.mark.parametrize("version", ["OpenAIV7", "ClaudeV5", "GeminiV6", "OpenRouterV3"])
def test_the_newer_versions_say_what_the_answer_cost_in_tokens(
    vlm_provider, photo, tmp_path, version
):
    step = {"type": type_of(version), "task_type": "caption", **needed(version)}
    outputs = run(spec_of(step), settings_for(vlm_provider, tmp_path, "describe"), photo)
    (call,) = vlm_provider.calls
    assert outputs["input_tokens"] == len(call.text.split()) + 85  # the played usage
    assert outputs["output_tokens"] == len(outputs["output"].split())


@pytest.mark.parametrize(
    ("step", "format_field"),
    [
        ({"type": "roboflow_core/open_ai@v1", "openai_model": "gpt-4o"}, "json_output_format"),
        ({"type": "OpenAI", "openai_api_key": "sk-step-key"}, "json_output_format"),
        (
            {"type": "roboflow_core/lmm@v1", "lmm_type": "gpt_4v", "remote_api_key": "sk-k"},
            "json_output",
        ),
    ],
)
def test_the_first_lmm_blocks_read_the_fields_their_json_format_names(
    vlm_provider, photo, tmp_path, step, format_field
):
    """``open_ai@v1`` and ``lmm@v1``: the prompt, told the JSON format, goes with the frame;
    each field the format names is read out (``not_detected`` where the answer lacks it)
    into ``structured_output`` and an output of its own."""
    expected = {"class_name": "the main object", "colour": "its colour"}
    given = {"prompt": "What is the main object?", "openai_api_key": "sk-step-key", **step}
    given[format_field] = expected
    if step["type"].endswith("lmm@v1"):
        given.pop("openai_api_key")
    outputs = run(spec_of(given), settings_for(vlm_provider, tmp_path, "classify"), photo)
    (call,) = vlm_provider.calls
    assert call.text.startswith("What is the main object?\n\nVALID response format is JSON:")
    assert call.images[0].shape == photo.shape and call.key == "local-key"
    assert outputs["class_name"] in {"person", "dog", "horse"}  # the detector's best
    assert outputs["colour"] == "not_detected"
    assert outputs["structured_output"] == {
        "class_name": outputs["class_name"],
        "colour": "not_detected",
    }
    assert outputs["image"] == {"width": photo.shape[1], "height": photo.shape[0]}
    assert outputs["error_message"] == "" and outputs["raw_output"].startswith("{")


def test_lmm_for_classification_answers_the_top_class(vlm_provider, photo, tmp_path):
    step = {
        "type": "roboflow_core/lmm_for_classification@v1",
        "lmm_type": "gpt_4v",
        "classes": ["person", "dog", "horse"],
        "lmm_config": {"gpt_model_version": "gpt-4o-mini", "max_tokens": 100},
    }
    outputs = run(spec_of(step), settings_for(vlm_provider, tmp_path, "top"), photo)
    (call,) = vlm_provider.calls
    assert "['person', 'dog', 'horse']" in call.text and call.body["max_tokens"] == 100
    assert outputs["top"] in {"person", "dog", "horse"}
    assert outputs["prediction_type"] == "classification"
    with pytest.raises(WorkflowCompilationError, match="CogVLM"):
        run(
            spec_of({**step, "lmm_type": "cog_vlm"}),
            settings_for(vlm_provider, tmp_path, "top"),
            photo,
        )
