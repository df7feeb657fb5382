"""``roboflow_core/slack_notification@v1``: a Slack message per frame that reaches the step
(put it behind ``continue_if`` or ``delta_filter``), ``{{ $parameters.name }}`` in the text
replaced by ``message_parameters`` (each through its ``message_parameters_operations``), and
``attachments`` uploaded with the text as their comment.

Messages go through ``sinks.slack.SlackSender`` (a queue on a thread of its own), so a frame
never waits on Slack, whatever ``fire_and_forget`` says; ``cooldown_seconds`` (0 to 900, as
the reference bounds it) spaces them. The token is the step's, a parameter's, or a secret
lent by ``environment_secrets_store``; it goes only into the request's ``Authorization``
header. Slack's API is ``VISIONSTREAM_SLACK_API_URL``, and it and every upload URL it answers
with pass the server's egress policy as they are connected to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from sinks.slack import SlackMessage, SlackSender

from ...settings.notifications import SlackSettings
from .base import BlockSettings, BuildContext, FrameState, setting
from .email import MessageTemplate, attached
from .fields import ANY, SECRET, FieldSpec, Takes
from .sinks import NotificationBlock
from .verification import Verifiable

__all__ = ["SlackNotificationBlock"]


@dataclass(frozen=True, kw_only=True)
class SlackSettingsOfStep(Verifiable):
    message: str = setting(FieldSpec(type="string"))
    message_parameters: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))
    message_parameters_operations: dict[str, Any] = setting(FieldSpec(default={}, type="object"))
    attachments: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))
    fire_and_forget: Any = setting(FieldSpec(default=True))
    disable_sink: Any = setting(FieldSpec(default=False))
    cooldown_seconds: int = setting(FieldSpec(default=5, type="integer", minimum=0, maximum=900))
    cooldown_session_key: Any = setting(FieldSpec(default=None))
    """The reference's cache key for the cooldown; here each step keeps its own."""


class SlackNotificationBlock(NotificationBlock):
    """Posts ``message`` to ``channel`` (an id, or a name with ``#``) as the token's bot."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/slack_notification@v1",)
    inputs = {
        "slack_token": FieldSpec((ANY, SECRET), takes=Takes.FRAME_OR_LITERAL),
        "channel": FieldSpec((ANY,), takes=Takes.FRAME_OR_LITERAL),
    }
    Settings: ClassVar[type[BlockSettings]] = SlackSettingsOfStep

    def __init__(self, name: str, config: SlackSettingsOfStep, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._template = MessageTemplate(name, config)
        self._slack = context.settings.slack if context.settings is not None else SlackSettings()
        self._pin = context.pin
        self._sender: SlackSender | None = None
        self.hold(float(config.cooldown_seconds), bool(config.disable_sink))
        self.verify_with(config, context)

    def _sender_now(self) -> SlackSender | None:
        with self._lock:
            if self._sender is None and not self._closed:
                self._sender = SlackSender(
                    self._slack.api_url, pin=self._pin, timeout_s=self._slack.timeout_s
                )
            return self._sender

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        if (held := self.held_back()) is not None:
            return held
        token, channel = inputs.get("slack_token"), inputs.get("channel")
        if not isinstance(token, str) or not token:
            return self.result(True, False, "slack_token must be a non-empty string")
        if not isinstance(channel, str) or not channel:
            return self.result(True, False, "channel must be a channel id or #name")
        parameters = self._template.parameters(inputs, frame)
        try:
            files = attached(inputs.get("attachments") or {}, images=True)
        except ValueError as exc:
            return self.result(True, False, str(exc))
        size = sum(map(len, files.values()))
        if size > self._slack.max_attachment_bytes:
            return self.result(
                True,
                False,
                f"attachments of {size} bytes are over the "
                f"server's {self._slack.max_attachment_bytes} "
                "(VISIONSTREAM_SLACK_MAX_ATTACHMENT_BYTES)",
            )
        sender = self._sender_now()
        message = SlackMessage(token, channel, self._template.text(parameters), files)
        if sender is None:
            return self.result(True, False, "Sink is closed")
        return self.deliver(lambda: sender.send(message))

    def close(self) -> None:
        self.close_verifier()  # first: what it confirms still goes out
        with self._lock:
            self._closed = True
            sender, self._sender = self._sender, None
        if sender is not None:
            sender.close()
