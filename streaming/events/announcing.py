"""Where a pipeline's described events are announced, as Frigate announces its
descriptions: POSTed to ``webhook_url``, published to ``<mqtt_topic>/event`` on
``mqtt_url``'s broker, e-mailed to ``email_to`` through the server's mail relay (its frame
attached; at most one message per ``VISIONSTREAM_SMTP_MIN_INTERVAL_S``); and the pipeline's
descriptions switched on and off over MQTT (``<mqtt_topic>/set``: ``ON`` or ``OFF``; the
switch's state retained at ``<mqtt_topic>/state``, whether the API or MQTT switched it).
Nothing here blocks the describer for long: every sink queues, and its own thread sends."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sinks.email import EmailSender, SmtpServer, compose
from sinks.mqtt import MqttConnection
from sinks.pinning import Pin
from sinks.webhook import WebhookSink

from .records import EventRecord

__all__ = ["DescriptionAnnouncer", "Mail", "announcement"]

_ON = {"on", "true", "1", "enable", "enabled"}
_OFF = {"off", "false", "0", "disable", "disabled"}


def announcement(event: EventRecord, fields: dict[str, Any]) -> dict[str, Any]:
    """A described event, as it is announced."""
    return {
        "type": "event_described",
        "uid": event.uid,
        "pipeline": event.pipeline,
        "source": event.source,
        "kind": event.kind,
        "step": event.step,
        "class_name": event.class_name,
        "tracker_id": event.tracker_id,
        "timestamp": event.at,
        "description": fields["description"],
        "summary": fields.get("summary"),
    }


@dataclass(frozen=True)
class Mail:
    """Described events by e-mail: through ``relay``, from ``sender``, to ``to``, at most
    one message per ``min_interval_s``."""

    relay: SmtpServer
    sender: str
    to: list[str]
    min_interval_s: float


def _mailed(body: dict[str, Any], sender: str, to: list[str], jpeg: bytes | None) -> Any:
    summary = body.get("summary") or {}
    what = body["class_name"] or body["kind"].replace("_", " ")
    title = summary.get("title") or f"{what} seen by pipeline {body['pipeline'][:8]}"
    lines = [body["description"], ""]
    if summary.get("threat_level") is not None:
        lines.append(f"Threat level: {summary['threat_level']} of 2")
    moment = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(body["timestamp"]))
    lines += [
        f"What: {body['kind'].replace('_', ' ')}, {what}"
        + (f" in {body['step']}" if body["step"] else ""),
        f"Where: pipeline {body['pipeline']}, source {body['source']}",
        f"When: {moment}",
    ]
    return compose(
        sender=sender,
        to=to,
        cc=[],
        bcc=[],
        subject=title[:200],
        text="\n".join(lines),
        attachments={"event.jpg": jpeg} if jpeg else None,
    )


class DescriptionAnnouncer:
    """``open`` (blocking: a worker's thread) connects the broker; ``close`` is idempotent
    and gives what was queued a few seconds to go."""

    def __init__(
        self,
        *,
        webhook_url: str | None,
        mqtt_url: str | None,
        mqtt_topic: str,
        pin: Pin | None,
        switch: Callable[[bool], None],
        mail: Mail | None = None,
    ) -> None:
        self.topic = mqtt_topic
        self._switch = switch
        self._mail = mail
        self._mailer = EmailSender(mail.relay) if mail is not None else None
        self._last_mail = -float("inf")
        self._lock = threading.Lock()
        self.mails_skipped = 0
        """Described events not e-mailed: within the relay's interval of the last one."""
        self._webhook = (
            WebhookSink(webhook_url, timeout_s=10.0, pin=pin) if webhook_url is not None else None
        )
        self._mqtt = (
            MqttConnection(mqtt_url, pin, subscriptions={f"{mqtt_topic}/set": self._switched})
            if mqtt_url is not None
            else None
        )

    def open(self, enabled: bool) -> None:
        """Connects the broker (its address checked by the pin) and says the switch's state."""
        self.state(enabled)

    def announce(
        self, event: EventRecord, fields: dict[str, Any], jpeg: bytes | None = None
    ) -> None:
        """``jpeg``: the frame the model saw, attached to the e-mail."""
        if fields.get("description") is None:
            return
        body = announcement(event, fields)
        if self._webhook is not None:
            self._webhook.write(body)
        if self._mqtt is not None:
            self._mqtt.publish(f"{self.topic}/event", json.dumps(body), qos=1)
        if self._mail is not None and self._mailer is not None and self._mail_due():
            self._mailer.send(_mailed(body, self._mail.sender, self._mail.to, jpeg))

    def _mail_due(self) -> bool:
        assert self._mail is not None
        now = time.monotonic()
        with self._lock:
            if now - self._last_mail < self._mail.min_interval_s:
                self.mails_skipped += 1
                return False
            self._last_mail = now
            return True

    def state(self, enabled: bool) -> None:
        """The switch's state, retained: what a dashboard shows, however it was switched."""
        if self._mqtt is not None:
            self._mqtt.publish(f"{self.topic}/state", "ON" if enabled else "OFF", retain=True)

    def _switched(self, payload: str) -> None:
        word = payload.strip().lower()
        if word in _ON or word in _OFF:
            self._switch(word in _ON)

    def close(self) -> None:
        if self._mailer is not None:
            self._mailer.close()
        if self._mqtt is not None:
            self._mqtt.close()
        if self._webhook is not None:  # what was described is still announced, briefly
            self._webhook.close(drain_s=5.0)
