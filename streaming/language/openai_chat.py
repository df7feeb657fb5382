"""OpenAI's chat completions, through the ``openai`` package: what every OpenAI-compatible
server speaks (Ollama, llama.cpp's ``llama-server``, vLLM, LM Studio) and OpenAI itself.

Images go as ``image_url`` parts holding base64 data URIs (which every local server takes),
a schema as ``response_format`` ``json_schema``. A thinking model that leaves ``content``
empty and its answer in ``reasoning_content`` is answered from there."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, TypeVar

import openai

from sinks.pinning import RefusedAddress

from .answers import Answer, Prompt, ProviderRefused, Usage
from .client import AnswerTooLarge, ProviderClient, Retry, refusal, retry_after

__all__ = ["OpenAIChat", "data_uri"]

T = TypeVar("T")


def data_uri(jpeg: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


class OpenAIChat(ProviderClient):
    api = "openai"

    def _client(self, key: str | None) -> openai.OpenAI:
        # Retries are ours (one policy for every API); the connection is our pinned client.
        return openai.OpenAI(
            base_url=self.url,
            api_key=key or "no-key",
            http_client=self.http,
            max_retries=0,
            timeout=self.spec.timeout_s,
        )

    def _send(self, prompt: Prompt, model: str) -> Answer:
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt.text}]
        content += [{"type": "image_url", "image_url": {"url": data_uri(i)}} for i in prompt.images]
        messages: list[dict[str, Any]] = []
        if prompt.system:
            messages.append({"role": "system", "content": prompt.system})
        messages.append({"role": "user", "content": content})
        request: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": prompt.max_tokens,
        }
        if prompt.temperature is not None:
            request["temperature"] = prompt.temperature
        if prompt.schema is not None:
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": prompt.schema},
            }
        if prompt.extra:
            request["extra_body"] = prompt.extra
        return self._answer(
            self._call(lambda: self._client(self.key(prompt)).chat.completions.create(**request)),
            model,
        )

    def _embed(self, texts: list[str], model: str) -> list[list[float]]:
        client = self._client(self.key(Prompt("")))
        response = self._call(
            lambda: client.embeddings.create(model=model, input=texts, encoding_format="float")
        )
        ordered = sorted(response.data, key=lambda item: item.index)
        if self._usage is not None and response.usage is not None:
            self._usage.vlm_token_counts(self.name, model, response.usage.prompt_tokens, 0)
        return [list(item.embedding) for item in ordered]

    def _call(self, request: Callable[[], T]) -> T:
        """The ``openai`` package's errors as ours: ``Retry`` or ``ProviderRefused``."""
        try:
            return request()
        except openai.APIStatusError as exc:
            error = refusal(exc.status_code, _message(exc))
            if isinstance(error, Retry):
                error.after = retry_after(exc.response.headers)
            raise error from None
        except openai.APIConnectionError as exc:  # timeouts too
            cause = exc.__cause__
            if isinstance(cause, RefusedAddress | AnswerTooLarge):
                raise ProviderRefused(f"provider {self.name!r}: {cause}") from None
            raise Retry(f"no answer: {type(exc).__name__}") from None

    def _answer(self, response: Any, model: str) -> Answer:
        if not response.choices:
            raise ProviderRefused(f"provider {self.name!r} answered no choices")
        message = response.choices[0].message
        text, from_reasoning = message.content, False
        if not text:  # a thinking model's answer (llama.cpp, vLLM's reasoning parsers)
            extra = message.model_extra or {}
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
            if isinstance(reasoning, str) and reasoning.strip():
                text, from_reasoning = reasoning, True
        if not text:
            finish = getattr(response.choices[0], "finish_reason", None)
            raise ProviderRefused(
                f"provider {self.name!r} answered empty content (finish_reason={finish})"
            )
        usage = response.usage
        return Answer(
            text=text,
            provider=self.name,
            model=response.model or model,
            usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage(),
            from_reasoning=from_reasoning,
        )


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return exc.message
