"""A real MQTT broker (Debian's mosquitto) on a free loopback port, and a subscriber."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import paho.mqtt.client as mqtt

from tests.support.server import LoggedProcess, free_port

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


@contextmanager
def mosquitto(tmp_path: Path) -> Iterator[str]:
    """A broker for the ``with`` block; yields its ``mqtt://127.0.0.1:port`` URL."""
    port = free_port()
    config = tmp_path / "mosquitto.conf"
    config.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    broker = LoggedProcess([MOSQUITTO, "-v", "-c", str(config)])
    try:
        broker.wait_for_output(f"Opening ipv4 listen socket on port {port}", timeout=20)
        yield f"mqtt://127.0.0.1:{port}"
    finally:
        broker.stop()


class Subscriber:
    """Every message on ``topic`` (wildcards allowed), latest value by topic."""

    def __init__(self, url: str, topic: str) -> None:
        host, _, port = url.removeprefix("mqtt://").partition(":")
        self.values: dict[str, str] = {}
        self.changed = threading.Condition()
        self._client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
        self._client.on_connect = lambda client, *_: client.subscribe(topic, qos=1)
        self._client.on_message = self._on_message
        self._client.connect(host, int(port))
        self._client.loop_start()

    def _on_message(self, _client, _userdata, message) -> None:
        with self.changed:
            self.values[message.topic] = message.payload.decode()
            self.changed.notify_all()

    def wait_for(self, predicate, timeout: float = 30) -> dict[str, str]:
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.values), timeout), self.values
            return dict(self.values)

    def publish(self, topic: str, payload: str) -> None:
        """Sent, and acknowledged by the broker (QoS 1), before this returns."""
        self._client.publish(topic, payload, qos=1).wait_for_publish(timeout=30)

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()
