"""One MQTT broker, through paho-mqtt's own thread: it connects, reconnects and sends (up
to ``max_queued`` messages held while the broker is away), so that no caller ever waits for
the broker. The broker's address is checked by the egress pin as it is first connected to,
and paho reconnects to that address, never to the name resolved again. Topics subscribed
to are subscribed again on every connection (a broker restarted forgets them)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from .pinning import Pin

__all__ = ["MqttConnection", "mqtt_address"]

log = logging.getLogger(__name__)


def mqtt_address(url: Any) -> tuple[str, int]:
    """``mqtt://host[:port]``'s host and port (1883 by default); ``ValueError`` otherwise."""
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        port = parts.port if parts is not None else None
    except ValueError:
        parts = None
    if parts is None or parts.scheme != "mqtt" or not parts.hostname:
        raise ValueError("must be mqtt://host[:port]")
    return parts.hostname, port or 1883


class MqttConnection:
    """``publish`` never blocks; ``subscriptions`` maps a topic to what is called (on
    paho's thread) with each message's payload. ``close`` is idempotent."""

    def __init__(
        self,
        url: str,
        pin: Pin | None,
        *,
        subscriptions: dict[str, Callable[[str], None]] | None = None,
        max_queued: int = 1000,
    ) -> None:
        self._host, self._port = mqtt_address(url)
        self._pin = pin
        self._subscriptions = dict(subscriptions or {})
        self._max_queued = max_queued
        self._lock = threading.Lock()
        self._client: Any = None
        self._closed = False

    def client(self) -> Any:
        """The connected (or connecting) client, made on first use; None once closed.
        ``OSError`` when the broker's address may not be reached. Blocking: it resolves the
        broker's name (a worker's thread, never the event loop)."""
        import paho.mqtt.client as mqtt  # only what publishes to MQTT loads it

        with self._lock:
            if self._client is None and not self._closed:
                address = self._pin(self._host, self._port) if self._pin else self._host
                client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
                client.max_queued_messages_set(self._max_queued)
                client.reconnect_delay_set(1, 30)
                if self._subscriptions:
                    client.on_connect = self._subscribe
                    client.on_message = self._message
                client.connect_async(address, self._port)
                client.loop_start()
                self._client = client
            return self._client

    def publish(self, topic: str, body: str, *, qos: int = 1, retain: bool = False) -> bool:
        """Queued for the broker; False when closed or its address is refused."""
        try:
            client = self.client()
        except OSError as exc:
            log.warning("mqtt %s: not connected: %s", self._host, exc)
            return False
        if client is None:
            return False
        client.publish(topic, body, qos=qos, retain=retain)
        return True

    def _subscribe(self, client: Any, _userdata: Any, _flags: Any, reason: Any, *_: Any) -> None:
        if not getattr(reason, "is_failure", False):
            for topic in self._subscriptions:
                client.subscribe(topic, qos=1)

    def _message(self, _client: Any, _userdata: Any, message: Any) -> None:
        handle = self._subscriptions.get(message.topic)
        if handle is None:
            return
        try:
            handle(message.payload.decode("utf-8", "replace")[:256])
        except Exception:  # a handler's bug must not end paho's thread
            log.exception("mqtt: the handler of %s failed", message.topic)

    def close(self) -> None:
        """After what is queued has gone, as far as paho can."""
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            client.disconnect()
            client.loop_stop()
