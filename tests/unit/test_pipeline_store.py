"""The pipeline store: requests kept on disk for a restarted server, private, crash-safe, and
never fatal to read."""

from __future__ import annotations

import json
import logging
import stat
import uuid

from streaming.config import Settings
from streaming.egress import EgressRefused
from streaming.pipelines import InitialisePipelinePayload, PipelineManager, PipelineStore
from tests.conftest import DETECT_SPEC

CAMERA = "rtsp://user:secret@127.0.0.1:554/stream"


def payload(**extra) -> InitialisePipelinePayload:
    return InitialisePipelinePayload.model_validate(
        {
            "api_key": "the-key",
            "video_configuration": {"type": "VideoConfiguration", "video_reference": CAMERA},
            "processing_configuration": {
                "type": "WorkflowConfiguration",
                "workflow_specification": DETECT_SPEC,
            },
            **extra,
        }
    )


def test_a_saved_request_comes_back_without_its_api_key_until_forgotten(tmp_path):
    directory = tmp_path / "pipelines"
    store = PipelineStore(directory)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    store.save(first, payload())
    store.save(second, payload(consumption_timeout=30))
    stored = {s.pipeline_id: s.request for s in store.stored()}
    assert stored.keys() == {first, second}
    assert "api_key" not in stored[first]
    restored = InitialisePipelinePayload.model_validate(stored[second])
    assert restored.video_configuration.video_reference == CAMERA
    assert restored.consumption_timeout == 30
    # The records hold camera credentials: the server's user alone may read them.
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / f"{first}.json").stat().st_mode) == 0o600
    store.forget(first)
    store.forget(first)  # idempotent
    assert [s.pipeline_id for s in store.stored()] == [second]
    assert sorted(p.name for p in directory.iterdir()) == [f"{second}.json", "lock"]
    store.close()
    store.close()


def test_unreadable_records_are_removed_with_a_warning_and_the_rest_load(tmp_path, caplog):
    directory = tmp_path / "pipelines"
    store = PipelineStore(directory)
    good = str(uuid.uuid4())
    store.save(good, payload())
    bad = [
        (f"{uuid.uuid4()}.json", b"{not json"),
        (f"{uuid.uuid4()}.json", b"[1, 2]"),
        (f"{uuid.uuid4()}.json", b"\xff\xfe\x00"),
        ("not-an-id.json", b"{}"),
        (f"{uuid.uuid4()}.json.tmp", b"{"),  # a save cut short by a crash
    ]
    for name, content in bad:
        (directory / name).write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="streaming.pipelines.store"):
        assert [s.pipeline_id for s in store.stored()] == [good]
    assert len([r for r in caplog.records if "unreadable" in r.getMessage()]) == 4
    assert sorted(p.name for p in directory.iterdir()) == [f"{good}.json", "lock"]
    store.close()


def test_a_second_server_on_the_same_directory_keeps_nothing(tmp_path, caplog):
    directory = tmp_path / "pipelines"
    owner = PipelineStore(directory)
    with caplog.at_level(logging.WARNING, logger="streaming.pipelines.store"):
        other = PipelineStore(directory)
    assert owner.enabled and not other.enabled
    assert "in use by another server" in caplog.text
    other.save(str(uuid.uuid4()), payload())
    assert other.stored() == [] and owner.stored() == []
    owner.close()
    assert PipelineStore(directory).enabled  # released on close


def test_without_a_directory_nothing_is_kept(tmp_path):
    store = PipelineStore(None)
    store.save(str(uuid.uuid4()), payload())
    assert not store.enabled and store.stored() == []


def test_a_record_is_replaced_whole(tmp_path):
    store = PipelineStore(tmp_path)
    pipeline_id = str(uuid.uuid4())
    store.save(pipeline_id, payload())
    store.save(pipeline_id, payload(consumption_timeout=5))
    (record,) = store.stored()
    assert record.request["consumption_timeout"] == 5
    assert json.loads((tmp_path / f"{pipeline_id}.json").read_text()) == record.request


async def test_restore_forgets_what_the_server_now_refuses_and_stops_when_it_shuts_down(tmp_path):
    store = PipelineStore(tmp_path)
    refused, kept = str(uuid.uuid4()), str(uuid.uuid4())
    store.save(refused, payload())
    # Neither request reaches a model, camera or thread: the manager's parts stay unused.
    manager = PipelineManager(Settings(), None, None, None, None, store)  # type: ignore[arg-type]

    async def refuse(_: InitialisePipelinePayload) -> None:
        raise EgressRefused("rtsp://127.0.0.1 is not in VISIONSTREAM_ALLOWED_NETWORKS")

    await manager.restore(refuse, stopping=lambda: False)
    assert store.stored() == [] and len(manager) == 0

    store.save(kept, payload())
    checked: list[InitialisePipelinePayload] = []

    async def check(request: InitialisePipelinePayload) -> None:
        checked.append(request)

    await manager.restore(check, stopping=lambda: True)  # the server began shutting down
    assert checked == [] and [s.pipeline_id for s in store.stored()] == [kept]
    store.close()
