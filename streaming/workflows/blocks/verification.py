"""A notification sent only once a vision-language model confirms it (NVIDIA VSS's alert
verification): a notification step given ``verify`` hands each notification, with the frame
it fired on, to a thread that asks the provider whether the picture really shows what the
alert is about. Confirmed, it is sent; rejected, it is not. Either way the verdict and its
reason are stored as a ``verification`` event of the stream, so rejected alerts stay
searchable (``GET /events?q=...``). The frame never waits for the verdict.

``verify`` (our extension of the reference's notification blocks)::

    {"provider": "ollama", "prompt": "Is someone climbing the fence?", "model": null}
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sinks.worker import QueueWorker

from ...errors import WorkflowCompilationError
from ...events import EventKind
from ...language import Prompt, ProviderError, Providers, decoding
from .base import BlockSettings, BuildContext, setting
from .fields import FieldSpec

__all__ = ["VERDICT_SCHEMA", "Verifiable", "Verifier", "VerifyConfiguration"]

log = logging.getLogger(__name__)

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirmed": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["confirmed", "reason"],
}
_ASK = (
    " Answer with a JSON object: confirmed (true when the picture shows it, false when it "
    "does not) and reason (one sentence)."
)


class VerifyConfiguration(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str = Field(min_length=1, max_length=128)
    """A provider of ``VISIONSTREAM_VLM_PROVIDERS``."""
    prompt: str = Field(
        default="An alert was raised from this picture. Does the picture really show a reason "
        "to alert someone?",
        max_length=4000,
    )
    model: str | None = Field(default=None, max_length=256)
    queue: int = Field(default=16, ge=1, le=256)
    """Notifications waiting for a verdict, at most (past it the oldest is dropped)."""


@dataclass(frozen=True, kw_only=True)
class Verifiable(BlockSettings):
    """The ``verify`` field of a notification step, declared once for every one."""

    verify: dict[str, Any] | None = setting(
        FieldSpec(
            default=None,
            type="object",
            nullable=True,
            description="Ours: send only once a vision-language model confirms the frame "
            "({provider, prompt, model})",
        )
    )


@dataclass
class _Pending:
    send: Callable[[], bool]
    frame: np.ndarray | None


class Verifier:
    """One step's verdicts: ``observe`` keeps the stream's newest frame, ``submit`` queues a
    notification for its verdict. ``close`` abandons what waits (idempotent)."""

    def __init__(self, step: str, config: VerifyConfiguration, context: BuildContext) -> None:
        if context.settings is None:
            raise WorkflowCompilationError(f"step '{step}': verify needs the server's settings")
        if config.provider not in context.settings.vlm.providers:
            known = ", ".join(sorted(context.settings.vlm.providers)) or "none"
            raise WorkflowCompilationError(
                f"step '{step}': verify names no provider {config.provider!r} "
                f"(VISIONSTREAM_VLM_PROVIDERS names: {known})"
            )
        self._step, self._config, self._context = step, config, context
        self._owned: Providers | None = None
        providers = context.language
        if providers is None:
            providers = self._owned = Providers(context.settings.vlm, pin=context.pin)
        self._providers = providers
        self.latest: np.ndarray | None = None
        self.confirmed = self.rejected = self.failed = 0
        self._worker: QueueWorker[_Pending] = QueueWorker(
            f"verify-{step}", self._verify, capacity=config.queue, drop_oldest=True, lazy=True
        )

    @classmethod
    def of(cls, step: str, given: dict[str, Any] | None, context: BuildContext) -> Verifier | None:
        """The step's verifier, from its ``verify`` field; None when it has none."""
        if given is None:
            return None
        try:
            config = VerifyConfiguration.model_validate(given)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
            )
            raise WorkflowCompilationError(f"step '{step}': verify: {problems}") from None
        return cls(step, config, context)

    def observe(self, image: np.ndarray) -> None:
        self.latest = image

    def submit(self, send: Callable[[], bool], frame: np.ndarray | None = None) -> bool:
        return self._worker.put(_Pending(send, frame if frame is not None else self.latest))

    def _verify(self, pending: _Pending) -> None:
        images: tuple[bytes, ...] = ()
        if pending.frame is not None:
            encoded = cv2.imencode(".jpg", pending.frame, [cv2.IMWRITE_JPEG_QUALITY, 85])[1]
            images = (bytes(encoded),)
        prompt = Prompt(
            self._config.prompt + _ASK,
            images,
            schema=VERDICT_SCHEMA,
            max_tokens=200,
            model=self._config.model,
        )
        try:
            answer = self._providers.named(self._config.provider).describe(prompt)
        except ProviderError as exc:
            # No verdict: nothing is sent (an unverified alert is what verify is there to stop).
            self.failed += 1
            self._record(None, f"no verdict: {exc}", sent=False)
            return
        error, parsed = decoding.extract_json(answer.text)
        confirmed = (not error) and isinstance(parsed, dict) and parsed.get("confirmed") is True
        reason = str(parsed.get("reason") or "") if isinstance(parsed, dict) else ""
        if error:
            reason = f"the verdict was no JSON: {answer.text[:200]}"
        sent = confirmed and pending.send()
        if confirmed:
            self.confirmed += 1
        else:
            self.rejected += 1
        self._record(confirmed, reason, sent=sent)

    def _record(self, confirmed: bool | None, reason: str, *, sent: bool) -> None:
        verdict = {"confirmed": confirmed, "reason": reason[:2000], "sent": sent}
        self._context.event(
            EventKind.VERIFICATION,
            self._step,
            payload=verdict,
            description=reason[:2000],
            verdict=verdict,
        )
        log.info("verify %s: %s (%s)", self._step, "sent" if sent else "not sent", reason[:200])

    def stats(self) -> dict[str, int]:
        return {"confirmed": self.confirmed, "rejected": self.rejected, "failed": self.failed}

    def close(self) -> None:
        # What waits still gets its verdict, briefly: an HTTP run's notification is asked
        # for as the run ends; a model that does not answer by then is not waited for.
        self._worker.close(timeout_s=10.0)
        if self._owned is not None:
            self._owned.close()
