"""Gemini's ``generateContent`` (``POST {base}/models/{model}:generateContent``), over httpx:
images as ``inline_data`` parts before the text, a schema as ``responseJsonSchema`` with a
JSON MIME type, the key in ``x-goog-api-key`` (never in the URL, where logs would keep it)."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

from .answers import Answer, Prompt, ProviderRefused, Usage
from .client import ProviderClient

__all__ = ["GeminiContent"]


class GeminiContent(ProviderClient):
    api = "gemini"

    def _send(self, prompt: Prompt, model: str) -> Answer:
        parts: list[dict[str, Any]] = [
            {
                "inline_data": {
                    "mime_type": "image/jpeg",
                    "data": base64.b64encode(image).decode("ascii"),
                }
            }
            for image in prompt.images
        ]
        parts.append({"text": prompt.text})
        config: dict[str, Any] = {"maxOutputTokens": prompt.max_tokens}
        if prompt.temperature is not None:
            config["temperature"] = prompt.temperature
        if prompt.schema is not None:
            config["responseMimeType"] = "application/json"
            config["responseJsonSchema"] = prompt.schema
        body: dict[str, Any] = {
            "contents": [{"role": "user", "parts": parts}],
            "generationConfig": config,
        }
        if prompt.system:
            body["systemInstruction"] = {"parts": [{"text": prompt.system}]}
        if prompt.extra:
            body.update(prompt.extra)
        headers = {}
        if (key := self.key(prompt)) is not None:
            headers["x-goog-api-key"] = key
        url = f"{self.url}/models/{quote(model, safe='')}:generateContent"
        response = self.post(url, headers, body)
        answer = self.answered(response)
        try:
            candidate = answer["candidates"][0]
            text = "".join(
                part.get("text", "")
                for part in candidate.get("content", {}).get("parts", [])
                if not part.get("thought")
            )
            usage = answer.get("usageMetadata") or {}
        except (KeyError, IndexError, TypeError, AttributeError):
            raise ProviderRefused(f"provider {self.name!r} answered no candidates") from None
        if not text:
            raise ProviderRefused(
                f"provider {self.name!r} answered no text "
                f"(finishReason={candidate.get('finishReason')})"
            )
        return Answer(
            text=text,
            provider=self.name,
            model=str(answer.get("modelVersion") or model),
            usage=Usage(
                int(usage.get("promptTokenCount", 0)), int(usage.get("candidatesTokenCount", 0))
            ),
        )
