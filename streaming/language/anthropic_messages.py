"""Anthropic's Messages API (``POST /v1/messages``), over httpx: images as base64 ``image``
blocks before the text; a schema said in the system prompt, as Anthropic's API takes no
response format of its own."""

from __future__ import annotations

import base64
import json
from typing import Any

from .answers import Answer, Prompt, ProviderRefused, Usage
from .client import ProviderClient

__all__ = ["AnthropicMessages"]

VERSION = "2023-06-01"


class AnthropicMessages(ProviderClient):
    api = "anthropic"

    def _send(self, prompt: Prompt, model: str) -> Answer:
        content: list[dict[str, Any]] = [
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/jpeg",
                    "data": base64.b64encode(image).decode("ascii"),
                },
            }
            for image in prompt.images
        ]
        content.append({"type": "text", "text": prompt.text})
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": prompt.max_tokens,
            "messages": [{"role": "user", "content": content}],
        }
        system = prompt.system or ""
        if prompt.schema is not None:
            system += "\nAnswer with JSON only, following this JSON schema: " + json.dumps(
                prompt.schema
            )
        if system.strip():
            body["system"] = system.strip()
        if prompt.temperature is not None:
            body["temperature"] = prompt.temperature
        if prompt.extra:
            body.update(prompt.extra)
        headers = {"anthropic-version": VERSION}
        if (key := self.key(prompt)) is not None:
            headers["x-api-key"] = key
        response = self.post(f"{self.url}/v1/messages", headers, body)
        answer = self.answered(response)
        try:
            text = "".join(
                block.get("text", "") for block in answer["content"] if block.get("type") == "text"
            )
            usage = answer.get("usage") or {}
        except (KeyError, TypeError, AttributeError):
            raise ProviderRefused(f"provider {self.name!r} answered no Messages JSON") from None
        if not text:
            raise ProviderRefused(
                f"provider {self.name!r} answered no text (stop_reason={answer.get('stop_reason')})"
            )
        return Answer(
            text=text,
            provider=self.name,
            model=str(answer.get("model") or model),
            usage=Usage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))),
        )
