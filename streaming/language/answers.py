"""What a vision-language model is asked (``Prompt``) and what it answers (``Answer``), and
how asking fails (``ProviderError`` and its kinds): the one interface every provider's API
module implements, whatever its wire format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Answer",
    "Prompt",
    "ProviderError",
    "ProviderRefused",
    "ProviderUnavailable",
    "Usage",
]


@dataclass(frozen=True)
class Prompt:
    """One question: text and images (JPEG bytes, in order), and how to answer it."""

    text: str
    images: tuple[bytes, ...] = ()
    system: str | None = None
    schema: dict[str, Any] | None = None
    """A JSON schema the answer must follow (OpenAI's ``response_format``, Gemini's
    ``responseJsonSchema``; for Anthropic, said in the system prompt)."""
    max_tokens: int = 500
    temperature: float | None = None
    model: str | None = None
    """The model to ask; None: the provider's own ``model``."""
    extra: dict[str, Any] | None = field(default=None, hash=False)
    """Sent as is in the request's body (OpenAI's ``extra_body``: vLLM's ``guided_choice``,
    llama.cpp's ``chat_template_kwargs``)."""
    api_key: str | None = field(default=None, repr=False, compare=False)
    """The caller's own key (a workflow's ``api_key``); None: the provider's."""


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class Answer:
    text: str
    provider: str
    model: str
    usage: Usage = Usage()
    from_reasoning: bool = False
    """The model left its answer in ``reasoning_content`` (a thinking model whose ``content``
    was empty): the text is that."""


class ProviderError(Exception):
    """Asking a provider failed; the message names the provider and says why, never a key."""


class ProviderRefused(ProviderError):
    """The provider answered no (HTTP 4xx other than 429: a bad key, a model that takes no
    images, a request it will not serve): asking again would not help."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ProviderUnavailable(ProviderError):
    """The provider did not answer in time, or said to come back later (429, 5xx), on
    every try."""
