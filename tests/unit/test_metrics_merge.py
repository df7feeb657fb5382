"""A Ray deployment's ``/metrics``: every replica's exposition in one, labelled by worker."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from streaming.metrics import Metrics, merge_workers


def test_every_workers_samples_are_kept_once_each_labelled_with_its_worker():
    first, second = Metrics(), Metrics()
    first.sessions.set(2)
    second.sessions.set(1)
    first.stage_ms.labels(stage="inference").observe(12)
    merged = merge_workers({"a": first.render().decode(), "b": second.render().decode()})
    families = {f.name: f for f in text_string_to_metric_families(merged.decode())}
    active = {s.labels["worker"]: s.value for s in families["visionstream_sessions_active"].samples}
    assert active == {"a": 2, "b": 1}
    inference = [
        s for s in families["visionstream_stage_milliseconds"].samples
        if s.name.endswith("_count") and s.labels.get("stage") == "inference"
    ]  # fmt: skip
    assert {(s.labels["worker"], s.value) for s in inference} == {("a", 1)}


def test_no_workers_reported_yet_is_an_empty_exposition():
    assert merge_workers({}) == b""
