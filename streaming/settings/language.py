"""Vision-language model providers (``VISIONSTREAM_VLM_*``): which servers the VLM blocks and
event descriptions ask, by name, and how each is rationed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .prefix import ProductSettings

__all__ = ["CLOUDS", "CLOUD_URLS", "LanguageSettings", "ProviderSettings", "VlmSettings"]

Api = Literal["openai", "anthropic", "gemini"]

CLOUD_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
}
"""Each API's own service: where a provider of that API with no ``base_url`` is."""

CLOUDS: dict[str, tuple[Api, str]] = {
    **{api: (api, url) for api, url in CLOUD_URLS.items()},  # type: ignore[misc]
    "openrouter": ("openai", "https://openrouter.ai/api/v1"),
}
"""The clouds the reference's VLM blocks call (``open_ai``, ``anthropic_claude``,
``google_gemini``; ``openrouter`` and ``llama_vision`` through OpenRouter): each one's API and
URL, used when no provider of that name is configured and the step gives its own key."""


class ProviderSettings(BaseModel):
    """One provider: an API at a base URL, with its key and its limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api: Api = "openai"
    """The wire format: OpenAI's chat completions (every OpenAI-compatible server: Ollama,
    llama.cpp's ``llama-server``, vLLM, LM Studio), Anthropic's Messages, Gemini's
    ``generateContent``."""
    base_url: str | None = None
    """Where it is (``http://127.0.0.1:11434/v1`` for Ollama); None: the API's own cloud
    service. Like every address the server connects to, it passes
    ``VISIONSTREAM_ALLOWED_NETWORKS`` as it is connected to."""
    api_key: SecretStr | None = None
    """Its key (never logged or shown); a workflow's own ``api_key`` wins."""
    model: str | None = None
    """The model asked when a step or a description names none (for a model family mapped
    to this provider: the model that plays the family)."""
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    """One request, at most."""
    retries: int = Field(default=2, ge=0, le=10)
    """Tries after the first on 429, 5xx, a timeout or a refused connection, with
    exponential backoff (or the provider's ``Retry-After``, up to ``max_backoff_s``)."""
    max_backoff_s: float = Field(default=30.0, ge=0, le=600)
    """The longest wait between two tries."""
    max_concurrency: int = Field(default=4, ge=1, le=256)
    """Requests in flight at once, over every step and description of the server."""
    max_answer_chars: int = Field(default=200_000, ge=1000)
    """An answer longer than this is refused (a runaway model), not decoded."""

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")) or "@" in value.split("/")[2]:
            raise ValueError("a provider's base_url is an http(s) URL without credentials")
        return value.rstrip("/")

    def url(self) -> str:
        return self.base_url or CLOUD_URLS[self.api]


class VlmSettings(ProductSettings):
    """The providers (``VISIONSTREAM_VLM_*``)."""

    model_config = SettingsConfigDict(env_prefix="VISIONSTREAM_VLM_", extra="ignore")

    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    """Providers by name, as JSON: ``{"ollama": {"api": "openai", "base_url":
    "http://127.0.0.1:11434/v1", "model": "qwen2.5vl:3b"}}``. A provider named ``openai``,
    ``anthropic``, ``gemini`` or ``openrouter`` is what the blocks of that cloud use (its
    URL, key and, where it names one, model); without one, such a block needs its own
    ``api_key`` and reaches the cloud's own URL."""
    families: dict[str, str] = Field(default_factory=dict)
    """Model families the reference runs locally (``florence-2``, ``qwen-vl``, ``smolvlm``,
    ``moondream``, ``cosmos``, ``glm-ocr``), mapped to a provider: ``{"florence-2":
    "ollama"}``, or to a provider and its model: ``{"qwen-vl": "ollama:qwen2.5vl:3b"}``."""

    embeddings: str | None = Field(default=None, max_length=512)
    """The provider (and model) that makes vectors of event descriptions, for search by
    meaning (``GET /events?about=``, ``similar_to=``): ``"ollama:nomic-embed-text"``, a
    provider of ``providers`` that speaks ``openai`` (``/embeddings``). None: events are
    searched by their words only."""

    live_min_interval_s: float = Field(default=1.0, ge=0, le=3600)
    """In a live stream or pipeline, the least time between two questions of one step (a
    step asks in the background, and frames carry its last answer and the answer's age)."""
    live_threads: int = Field(default=16, ge=1, le=256)
    """Threads that ask for live steps, over the whole server (each step has at most one
    question in flight)."""

    @field_validator("embeddings")
    @classmethod
    def _provider(cls, value: str | None) -> str | None:
        if value is not None and not value.split(":", 1)[0]:
            raise ValueError("embeddings names no provider (provider or provider:model)")
        return value

    @field_validator("families")
    @classmethod
    def _named(cls, value: dict[str, str]) -> dict[str, str]:
        for family, target in value.items():
            if not target.split(":", 1)[0]:
                raise ValueError(f"family {family!r} names no provider")
        return value


class LanguageSettings(BaseSettings):
    """Vision-language models. A part of ``Settings``."""

    vlm: VlmSettings = Field(default_factory=VlmSettings)
    """Providers and model families (``VISIONSTREAM_VLM_*``)."""
