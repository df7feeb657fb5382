"""A vision-language provider played on loopback: OpenAI's chat completions, Anthropic's
Messages and Gemini's ``generateContent``, as those APIs answer. It decodes the images it is
sent and answers from their pixels by running the suite's detector on them, so what a test
gets back proves which picture reached the model.

What it answers is chosen by the model a request names (a script):

- ``describe``: a sentence naming what the detector saw (``I see 1 person.``);
- ``classify`` / ``multilabel``: the reference's classification JSON;
- ``top``: ``{"top": <the detector's best class>}`` (the first LMM blocks' classification);
- ``detect-<convention>``: the detections in that box convention (``normalized``,
  ``absolute``, ``yxyx_1000``, ``xyxy_1000``, ``named_1000``, ``percent``);
- ``verify``: a verdict, ``confirmed`` where the detector finds a person;
- ``fenced-<script>``: the answer in a ```json fence, with prose around it;
- ``reasoning-<script>``: empty ``content`` and the answer in ``reasoning_content``;
- ``text-only``: a 400 "model does not support images" when sent an image;
- ``prose``: an answer that is no JSON.

OpenAI's ``/embeddings`` answers with vectors of meaning played by word groups: words of
one sense (``person``, ``man``, ``pedestrian``, ``someone``) share a dimension, so a search
by a word a description never used finds it, as a real embeddings model would; other words
fall in hashed dimensions. Model ``broken-embeddings`` answers zero vectors.

``fail_next`` holds HTTP statuses it answers first (429 with ``Retry-After``, 503), one per
request; ``delay_s`` holds every answer that long (a slow provider); ``hang()`` holds
them until ``release()`` (a hung one). Every request is kept, in order."""

from __future__ import annotations

import base64
import json
import re
import sys
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import cv2
import numpy as np
import supervision as sv

__all__ = ["ProviderCall", "VlmProvider", "sense"]

Detector = Callable[[np.ndarray], sv.Detections]


@dataclass
class ProviderCall:
    api: str
    """``openai``, ``anthropic`` or ``gemini``."""
    model: str
    key: str | None
    text: str
    images: list[np.ndarray]
    body: dict[str, Any] = field(repr=False)


class VlmProvider:
    """A context manager; ``openai_url``, ``anthropic_url`` and ``gemini_url`` are the base
    URLs a provider's settings name."""

    def __init__(self, detect: Detector) -> None:
        self.detect = detect
        self.calls: list[ProviderCall] = []
        self.embedded: list[str] = []
        """Every text it was asked to embed, in order."""
        self.fail_next: list[int] = []
        self.retry_after = "0.05"
        self.delay_s = 0.0
        self.in_flight = 0
        self.peak = 0
        """The most requests it answered at once."""
        self.changed = threading.Condition()
        self._released = threading.Event()
        self._released.set()
        self._closing = threading.Event()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                status, answer, headers = provider.handle(self.path, dict(self.headers), body)
                content = json.dumps(answer).encode()
                self.send_response(status)
                for name, value in {**headers, "content-type": "application/json"}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def openai_url(self) -> str:
        return f"{self.root}/v1"

    @property
    def anthropic_url(self) -> str:
        return self.root

    @property
    def gemini_url(self) -> str:
        return f"{self.root}/v1beta"

    def __enter__(self) -> VlmProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def hang(self) -> None:
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def wait_calls(self, count: int, timeout: float = 60.0) -> list[ProviderCall]:
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.calls) >= count, timeout):
                raise AssertionError(f"{len(self.calls)} calls, not {count}, in {timeout}s")
            return list(self.calls)

    # -- one request --------------------------------------------------------------------

    def handle(
        self, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        if path.endswith("/embeddings"):
            return self._embeddings(body)
        call = _parse(path, {k.lower(): v for k, v in headers.items()}, body)
        with self.changed:
            self.calls.append(call)
            self.changed.notify_all()
            status = self.fail_next.pop(0) if self.fail_next else None
        if status is not None:
            extra = {"retry-after": self.retry_after} if status == 429 else {}
            return status, {"error": {"message": f"played failure {status}"}}, extra
        with self.changed:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            self._released.wait()
            if self.delay_s:
                self._closing.wait(self.delay_s)  # a slow model, ended early by the test's end
        finally:
            with self.changed:
                self.in_flight -= 1
        if self._closing.is_set():  # the test is over: its detector may be gone
            return 503, {"error": {"message": "shutting down"}}, {}
        script = call.model
        if script == "text-only" and call.images:
            return 400, {"error": {"message": "model does not support images"}}, {}
        reasoning = script.startswith("reasoning-")
        text = self.answer(script.removeprefix("reasoning-"), call.images)
        return 200, _shaped(call, text, reasoning), {}

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        with self.changed:
            self.embedded += texts
            self.changed.notify_all()
            status = self.fail_next.pop(0) if self.fail_next else None
        if status is not None:
            extra = {"retry-after": self.retry_after} if status == 429 else {}
            return status, {"error": {"message": f"played failure {status}"}}, extra
        broken = body["model"] == "broken-embeddings"
        data = [
            {"object": "embedding", "index": i, "embedding": [0.0] * 8 if broken else sense(t)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(len(t.split()) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}, {}

    def answer(self, script: str, images: list[np.ndarray]) -> str:
        if script.startswith("fenced-"):
            inner = self.answer(script.removeprefix("fenced-"), images)
            return f"Here is what I found:\n```json\n{inner}\n```\nAnything else?"
        found = self.detect(images[0]) if images else sv.Detections.empty()
        names = [str(n) for n in found.data.get("class_name", [])]
        if script == "classify":
            if not len(found):
                return json.dumps({"class_name": "nothing", "confidence": 0.5})
            best = int(np.argmax(found.confidence))
            return json.dumps(
                {"class_name": names[best], "confidence": float(found.confidence[best])}
            )
        if script == "top":  # lmm_for_classification's answer
            best = names[int(np.argmax(found.confidence))] if len(found) else "nothing"
            return json.dumps({"top": best})
        if script == "multilabel":
            scores = found.confidence.tolist()
            entries = [{"class": n, "confidence": c} for n, c in zip(names, scores, strict=True)]
            return json.dumps({"predicted_classes": entries})
        if script.startswith("detect-"):
            height, width = images[0].shape[:2]
            return json.dumps(_boxes(script.removeprefix("detect-"), found, names, width, height))
        if script == "verify":  # confirmed where the detector finds a person
            return json.dumps({"confirmed": "person" in names, "reason": _seen(names)})
        if script == "prose":
            return "I would rather not answer in JSON today."
        return _seen(names)

    def close(self) -> None:
        self.__exit__()


SENSES = tuple(
    set(words.split())
    for words in (
        "person persons people man men woman women pedestrian pedestrians someone somebody "
        "human walker",
        "car cars vehicle vehicles automobile truck van",
        "dog dogs cat cats animal animals pet pets",
        "bicycle bicycles bike bikes cyclist",
        "nothing empty nobody",
    )
)
_HASHED = 32


def sense(text: str) -> list[float]:
    """A vector of ``text``'s meaning: a dimension per sense, hashed ones for other words."""
    vector = [0.0] * (len(SENSES) + _HASHED)
    for word in re.findall(r"[a-z]+", text.lower()):
        for i, words in enumerate(SENSES):
            if word in words:
                vector[i] += 1.0
                break
        else:
            vector[len(SENSES) + zlib.crc32(word.encode()) % _HASHED] += 0.25
    return vector


def _seen(names: list[str]) -> str:
    counts = {n: names.count(n) for n in sorted(set(names))}
    return f"I see {', '.join(f'{c} {n}' for n, c in counts.items()) or 'nothing'}."


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up on a held answer (a timeout under test) is no error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _boxes(convention: str, found: sv.Detections, names: list[str], w: int, h: int) -> Any:
    rows = []
    found_rows = zip(found.xyxy.tolist(), names, found.confidence.tolist(), strict=True)
    for (x1, y1, x2, y2), name, score in found_rows:
        entry: dict[str, Any] = {"confidence": round(float(score), 3)}
        if convention == "normalized":
            entry |= {
                "class_name": name,
                "x_min": x1 / w,
                "y_min": y1 / h,
                "x_max": x2 / w,
                "y_max": y2 / h,
            }
        elif convention == "named_1000":
            entry |= {
                "label": name,
                "x_min": x1 * 1000 / w,
                "y_min": y1 * 1000 / h,
                "x_max": x2 * 1000 / w,
                "y_max": y2 * 1000 / h,
            }
        elif convention == "absolute":
            entry |= {"label": name, "box_2d": [round(x1), round(y1), round(x2), round(y2)]}
        elif convention == "yxyx_1000":
            entry |= {
                "label": name,
                "box_2d": [
                    round(v) for v in (y1 * 1000 / h, x1 * 1000 / w, y2 * 1000 / h, x2 * 1000 / w)
                ],
            }
        elif convention == "xyxy_1000":
            entry |= {
                "label": name,
                "bbox_2d": [
                    round(v) for v in (x1 * 1000 / w, y1 * 1000 / h, x2 * 1000 / w, y2 * 1000 / h)
                ],
            }
        elif convention == "percent":
            entry |= {
                "label": name,
                "box_2d": [
                    round(v, 2) for v in (x1 * 100 / w, y1 * 100 / h, x2 * 100 / w, y2 * 100 / h)
                ],
            }
        else:
            raise ValueError(f"no convention {convention!r}")
        rows.append(entry)
    return {"detections": rows} if convention in ("normalized", "named_1000") else rows


def _image(data: str) -> np.ndarray:
    pixels = np.frombuffer(base64.b64decode(data), np.uint8)
    image = cv2.imdecode(pixels, cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("an image part that is no image")
    return image


def _parse(path: str, headers: dict[str, str], body: dict[str, Any]) -> ProviderCall:
    if path.endswith("/chat/completions"):
        texts, images = [], []
        for message in body["messages"]:
            parts = message["content"]
            for part in [{"type": "text", "text": parts}] if isinstance(parts, str) else parts:
                if part["type"] == "text":
                    texts.append(part["text"])
                else:
                    images.append(_image(part["image_url"]["url"].split(",", 1)[1]))
        key = headers.get("authorization", "").removeprefix("Bearer ") or None
        return ProviderCall("openai", body["model"], key, "\n".join(texts), images, body)
    if path.endswith("/v1/messages"):
        texts, images = ([body["system"]] if body.get("system") else []), []
        for part in body["messages"][0]["content"]:
            if part["type"] == "text":
                texts.append(part["text"])
            else:
                images.append(_image(part["source"]["data"]))
        return ProviderCall(
            "anthropic", body["model"], headers.get("x-api-key"), "\n".join(texts), images, body
        )
    if (found := re.search(r"/models/([^/]+):generateContent$", path)) is not None:
        texts, images = [], []
        for part in body["contents"][0]["parts"]:
            if "text" in part:
                texts.append(part["text"])
            else:
                images.append(_image(part["inline_data"]["data"]))
        return ProviderCall(
            "gemini", found.group(1), headers.get("x-goog-api-key"), "\n".join(texts), images, body
        )
    raise ValueError(f"no API at {path}")


def _shaped(call: ProviderCall, text: str, reasoning: bool) -> dict[str, Any]:
    """``text`` as the API the call spoke answers, with token counts of its own making."""
    usage_in, usage_out = len(call.text.split()) + 85 * len(call.images), len(text.split())
    if call.api == "openai":
        message = {"role": "assistant", "content": "" if reasoning else text}
        if reasoning:
            message["reasoning_content"] = text
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": call.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": usage_in,
                "completion_tokens": usage_out,
                "total_tokens": usage_in + usage_out,
            },
        }
    if call.api == "anthropic":
        return {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": call.model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": usage_in, "output_tokens": usage_out},
        }
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": usage_in, "candidatesTokenCount": usage_out},
        "modelVersion": call.model,
    }
