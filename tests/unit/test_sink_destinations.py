"""A pipeline sink cannot connect where the egress policy did not look: every sink field
that names a URL (or a host) is among the destinations the sink declares, which the server
checks before a pipeline starts (``routes/pipelines.py``), whatever the sink."""

from __future__ import annotations

import typing

import pytest

from sinks.base import SinkSettings
from streaming.pipelines.models import SinkConfiguration

_REACHING = ("url", "host", "server", "endpoint", "address")


def _sink_types() -> list[type[SinkSettings]]:
    found = []
    for field in SinkConfiguration.model_fields.values():
        for arg in typing.get_args(field.annotation) or (field.annotation,):
            if isinstance(arg, type) and issubclass(arg, SinkSettings):
                found.append(arg)
    return found


@pytest.mark.parametrize("sink", _sink_types(), ids=lambda cls: cls.__name__)
def test_every_field_naming_a_destination_is_declared(sink: type[SinkSettings]) -> None:
    reaching = [name for name in sink.model_fields if any(w in name for w in _REACHING)]
    if not reaching:
        return  # writes files only: nothing to declare
    values = {
        name: "http://127.0.0.1:9/x" if name in reaching else None for name in sink.model_fields
    }
    made = sink.model_construct(**{k: v for k, v in values.items() if v is not None})
    declared = {url for url, _ in made.destinations()}
    assert declared >= {values[name] for name in reaching}, (sink.__name__, reaching)


def test_the_webhook_sink_declares_its_url() -> None:
    from sinks.webhook import WebhookSinkConfiguration

    sink = WebhookSinkConfiguration(url="http://127.0.0.1:9/hook")
    assert sink.destinations() == [("http://127.0.0.1:9/hook", "webhook url")]
