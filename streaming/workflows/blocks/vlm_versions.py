"""The reference's cloud VLM blocks, version by version, as one table (``VERSIONS``): the
cloud each asks, the field naming its model and its default, its key's, its fields' bounds
and extras, and what it outputs beyond the answer. ``cloud_vlms`` makes a block of each."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...language.tasks import TASKS
from .fields import REQUIRED, FieldSpec

__all__ = ["ROBOFLOW_PROXY_KEY", "VERSIONS", "Version", "literal"]

ROBOFLOW_PROXY_KEY = "rf_key:account"


def literal(default: Any = None, **spec: Any) -> FieldSpec:
    return FieldSpec(default=default, **spec)


_MAX_TOKENS = literal(None, type="integer", minimum=16, nullable=True)
"""The newer OpenAI versions' ``max_tokens``: unset, or 16 at least."""


@dataclass(frozen=True)
class Version:
    """One block version: what it is called, which cloud it asks, its fields' defaults."""

    type_ids: tuple[str, ...]
    cloud: str
    model: tuple[str, Any]
    """The field naming the model, and its default (REQUIRED: none)."""
    key: tuple[str, Any] | None = ("api_key", ROBOFLOW_PROXY_KEY)
    max_tokens: FieldSpec = _MAX_TOKENS
    temperature_max: float = 2.0
    tasks: tuple[str, ...] = TASKS
    decodes: bool = False
    """Reads the answer into ``predictions`` (``error_status``, ``inference_id``)."""
    frame_extras: tuple[str, ...] = ()
    """Per-frame fields it takes that change nothing here (``image_detail``,
    ``reasoning_effort``, ...): accepted as the reference's workflows write them."""
    literal_extras: tuple[tuple[str, FieldSpec], ...] = ()
    models: dict[str, str] | None = None
    """Model names as the block offers them -> as the cloud knows them (Llama's)."""
    thinking: bool = False
    """It has OpenRouter's ``thinking`` output (v2)."""
    shrinks_to: str | None = None
    """The field bounding the uploaded image's longest edge (Claude's ``max_image_size``)."""
    temperature: float | None = None
    """``temperature``'s default (None: the provider's)."""
    tokens: bool = False
    """It has the ``input_tokens`` and ``output_tokens`` outputs (the answer's usage)."""


_TASKS_V2 = TASKS[:-1]  # no object detection before open_ai v4
_CLAUDE_EXTRAS = (
    ("extended_thinking", literal(None, type="boolean", nullable=True)),
    ("thinking_budget_tokens", literal(None, type="integer", minimum=1024, nullable=True)),
)
_GEMINI_V3 = Version(
    ("roboflow_core/google_gemini@v3",),
    "gemini",
    ("model_version", "gemini-3.1-pro-preview"),
    max_tokens=literal(None, type="integer", nullable=True),
    frame_extras=("thinking_level", "google_code_execution"),
)
_LLAMA = {
    "11B (Free) - OpenRouter": "meta-llama/llama-3.2-11b-vision-instruct:free",
    "11B (Regular) - OpenRouter": "meta-llama/llama-3.2-11b-vision-instruct",
    "90B (Free) - OpenRouter": "meta-llama/llama-3.2-90b-vision-instruct:free",
    "90B (Regular) - OpenRouter": "meta-llama/llama-3.2-90b-vision-instruct",
    "11B - OpenRouter": "meta-llama/llama-3.2-11b-vision-instruct",
}

_CLAUDE_V3 = Version(
    ("roboflow_core/anthropic_claude@v3",),
    "anthropic",
    ("model_version", "claude-sonnet-4-5"),
    max_tokens=literal(None, type="integer", nullable=True),
    temperature_max=1.0,
    literal_extras=_CLAUDE_EXTRAS,
    frame_extras=("media_type",),
    shrinks_to="max_image_size",
)
_OPENROUTER = Version(
    ("roboflow_core/openrouter@v1",),
    "openrouter",
    ("model_id", REQUIRED),
    max_tokens=literal(500, type="integer", above=1),
    temperature=0.1,
    literal_extras=(("privacy_level", literal("deny", choices=("allow", "deny", "zdr"))),),
)
"""What OpenRouter's blocks share (the reference's ``OpenRouterBlockManifestMixin``)."""
_OPENROUTER_V1 = replace(_OPENROUTER, key=("api_key", REQUIRED), literal_extras=())
"""The model makers' first OpenRouter blocks: the caller's own key, no privacy level."""
_GEMMA = {
    "Gemma 4 31B - OpenRouter": "google/gemma-4-31b-it",
    "Gemma 4 26B A4B - OpenRouter": "google/gemma-4-26b-a4b-it",
}
_KIMI = {
    "Kimi K2.5 - OpenRouter": "moonshotai/kimi-k2.5",
    "Kimi K2.6 - OpenRouter": "moonshotai/kimi-k2.6",
}
_QWEN_3_5 = {
    "Qwen 3.5 9B - OpenRouter": "qwen/qwen3.5-9b",
    "Qwen 3.5 27B - OpenRouter": "qwen/qwen3.5-27b",
    "Qwen 3.5 122B A10B - OpenRouter": "qwen/qwen3.5-122b-a10b",
    "Qwen 3.5 397B A17B - OpenRouter": "qwen/qwen3.5-397b-a17b",
    "Qwen 3.5 Flash 02-23 - OpenRouter": "qwen/qwen3.5-flash-02-23",
    "Qwen 3.5 Plus 20260420 - OpenRouter": "qwen/qwen3.5-plus-20260420",
}
_QWEN_3_6 = {
    "Qwen 3.6 27B - OpenRouter": "qwen/qwen3.6-27b",
    "Qwen 3.6 35B A3B - OpenRouter": "qwen/qwen3.6-35b-a3b",
    "Qwen 3.6 Flash - OpenRouter": "qwen/qwen3.6-flash",
    "Qwen 3.6 Plus - OpenRouter": "qwen/qwen3.6-plus",
    "Qwen 3.6 Max Preview - OpenRouter": "qwen/qwen3.6-max-preview",
}
_GEMMA_31B = "Gemma 4 31B - OpenRouter"
_KIMI_K2_6 = "Kimi K2.6 - OpenRouter"
_REASONING: dict[str, Any] = {
    "max_tokens": literal(2048, type="integer", above=1),
    "frame_extras": ("reasoning_effort",),
}


def _maker(base: Version, block: str, label: str, models: dict[str, str], **more: Any) -> Version:
    """A model maker's block on OpenRouter (``google_gemma@v1``): its default model's label,
    and every label as OpenRouter names the model."""
    return replace(
        base,
        type_ids=(f"roboflow_core/{block}",),
        model=("model_version", label),
        models=models,
        **more,
    )


VERSIONS: dict[str, Version] = {
    "OpenAIV2": Version(
        ("roboflow_core/open_ai@v2",),
        "openai",
        ("model_version", "gpt-4o"),
        key=("api_key", REQUIRED),
        max_tokens=literal(450, type="integer"),
        tasks=_TASKS_V2,
        frame_extras=("image_detail",),
    ),
    "OpenAIV3": Version(
        ("roboflow_core/open_ai@v3",),
        "openai",
        ("model_version", "gpt-5"),
        max_tokens=literal(450, type="integer"),
        tasks=_TASKS_V2,
        frame_extras=("image_detail",),
    ),
    "OpenAIV4": Version(
        ("roboflow_core/open_ai@v4", "roboflow_core/open_ai@v5"),
        "openai",
        ("model_version", "gpt-5.1"),
        frame_extras=("image_detail", "reasoning_effort"),
    ),
    "OpenAIV6": Version(
        ("roboflow_core/open_ai@v6",),
        "openai",
        ("model_version", "gpt-5.1"),
        frame_extras=("image_detail", "reasoning_effort"),
        tokens=True,
    ),
    "OpenAIV7": Version(
        ("roboflow_core/open_ai@v7",),
        "openai",
        ("model_version", "gpt-5.1"),
        decodes=True,
        tokens=True,
        frame_extras=("image_detail", "reasoning_effort", "service_tier", "output_classes"),
    ),
    "ClaudeV1": Version(
        ("roboflow_core/anthropic_claude@v1",),
        "anthropic",
        ("model_version", "claude-sonnet-4-5"),
        key=("api_key", REQUIRED),
        max_tokens=literal(450, type="integer"),
        shrinks_to="max_image_size",
    ),
    "ClaudeV2": Version(
        ("roboflow_core/anthropic_claude@v2",),
        "anthropic",
        ("model_version", "claude-sonnet-4-5"),
        key=("api_key", REQUIRED),
        max_tokens=literal(None, type="integer", nullable=True),
        temperature_max=1.0,
        literal_extras=_CLAUDE_EXTRAS,
        shrinks_to="max_image_size",
    ),
    "ClaudeV3": _CLAUDE_V3,
    "ClaudeV4": replace(_CLAUDE_V3, type_ids=("roboflow_core/anthropic_claude@v4",), tokens=True),
    "ClaudeV5": Version(
        ("roboflow_core/anthropic_claude@v5",),
        "anthropic",
        ("model_version", "claude-sonnet-4-5"),
        max_tokens=literal(None, type="integer", nullable=True),
        temperature_max=1.0,
        decodes=True,
        literal_extras=_CLAUDE_EXTRAS,
        frame_extras=("media_type",),
        shrinks_to="max_image_size",
        tokens=True,
    ),
    "GeminiV1": Version(
        ("roboflow_core/google_gemini@v1",),
        "gemini",
        ("model_version", "gemini-2.5-flash"),
        key=("api_key", REQUIRED),
        max_tokens=literal(450, type="integer"),
        frame_extras=("response_mime_type",),
    ),
    "GeminiV2": Version(
        ("roboflow_core/google_gemini@v2",),
        "gemini",
        ("model_version", "gemini-3.1-pro-preview"),
        key=("api_key", REQUIRED),
        max_tokens=literal(None, type="integer", nullable=True),
        frame_extras=("thinking_level", "response_mime_type"),
    ),
    "GeminiV3": _GEMINI_V3,
    "GeminiV4": replace(_GEMINI_V3, type_ids=("roboflow_core/google_gemini@v4",)),
    "GeminiV5": replace(_GEMINI_V3, type_ids=("roboflow_core/google_gemini@v5",), tokens=True),
    "GeminiV6": replace(
        _GEMINI_V3, type_ids=("roboflow_core/google_gemini@v6",), decodes=True, tokens=True
    ),
    "LlamaVisionV1": Version(
        ("roboflow_core/llama_3_2_vision@v1",),
        "openrouter",
        ("model_version", "11B (Free) - OpenRouter"),
        key=("api_key", REQUIRED),
        max_tokens=literal(500, type="integer", above=1),
        tasks=_TASKS_V2,
        models=_LLAMA,
    ),
    "LlamaVisionV2": replace(
        _OPENROUTER,
        type_ids=("roboflow_core/llama_vision@v2",),
        model=("model_version", "11B - OpenRouter"),
        tasks=_TASKS_V2,
        models=_LLAMA,
    ),
    "OpenRouterV1": replace(_OPENROUTER, type_ids=("roboflow_core/openrouter@v1",)),
    "OpenRouterV2": replace(
        _OPENROUTER,
        type_ids=("roboflow_core/openrouter@v2",),
        max_tokens=literal(2048, type="integer", above=1),
        frame_extras=("reasoning_effort",),
        thinking=True,
        tokens=True,
    ),
    "OpenRouterV3": replace(
        _OPENROUTER,
        type_ids=("roboflow_core/openrouter@v3",),
        max_tokens=literal(2048, type="integer", above=1),
        decodes=True,
        frame_extras=("reasoning_effort", "detection_format"),
        tokens=True,
    ),
    # The model makers' blocks on OpenRouter: the first versions take the caller's own
    # key; the later ones OpenRouter's shared fields (a Roboflow key by default).
    "GemmaV1": _maker(_OPENROUTER_V1, "google_gemma@v1", _GEMMA_31B, _GEMMA),
    "GemmaV2": _maker(_OPENROUTER, "google_gemma@v2", _GEMMA_31B, _GEMMA),
    "GemmaV3": _maker(
        _OPENROUTER, "google_gemma@v3", _GEMMA_31B, _GEMMA, **_REASONING, tokens=True
    ),
    "GemmaV4": _maker(
        _OPENROUTER, "google_gemma@v4", _GEMMA_31B, _GEMMA, **_REASONING, decodes=True, tokens=True
    ),
    "KimiV1": _maker(_OPENROUTER_V1, "kimi_openrouter@v1", _KIMI_K2_6, _KIMI),
    "KimiV2": _maker(_OPENROUTER, "kimi_openrouter@v2", _KIMI_K2_6, _KIMI),
    "KimiV3": _maker(_OPENROUTER, "kimi_openrouter@v3", _KIMI_K2_6, _KIMI, decodes=True),
    "Qwen35OpenRouterV1": _maker(
        _OPENROUTER_V1, "qwen3_5_openrouter@v1", "Qwen 3.5 27B - OpenRouter", _QWEN_3_5
    ),
    "Qwen36OpenRouterV1": _maker(
        _OPENROUTER_V1, "qwen3_6_openrouter@v1", "Qwen 3.6 35B A3B - OpenRouter", _QWEN_3_6
    ),
}
