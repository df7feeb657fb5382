"""Errors that start with the fix: the nearest names to a mistyped one, a key that was never
given told apart from a wrong one."""

from __future__ import annotations

import pytest
from pydantic import SecretStr
from starlette.requests import Request

from streaming.config import Settings, environment_notes
from streaming.errors import InvalidRequest, Unauthorized
from streaming.server.auth import ApiKeyGuard
from streaming.suggest import did_you_mean, nearest
from streaming.workflows.library import WorkflowLibrary


def test_the_nearest_names_come_closest_first_and_case_is_ignored():
    names = ["yolov3-tiny-416", "pp-ocrv4", "yolov8n-640"]
    assert nearest("YOLOv3-tiny", names) == ["yolov3-tiny-416"]
    assert did_you_mean("yolov3-tiny-461", names, limit=1) == "did you mean 'yolov3-tiny-416'?"
    assert did_you_mean("yolov3-tiny-461", names).startswith("did you mean 'yolov3-tiny-416' or")
    assert did_you_mean("something-else", names) == ""


def test_a_mistyped_setting_is_named_with_the_one_meant():
    lines = environment_notes(
        {
            "VISIONSTREAM_MODEL_DIR": "/m",
            "VISIONSTREAM_DECODE_HWACCELL": "cuda",
            "VISIONSTREAM_PORT": "9001",
            "HOME": "/root",
        }
    )
    assert len(lines) == 2, lines
    decode, models = lines
    assert decode.startswith("VISIONSTREAM_DECODE_HWACCELL is not a setting, and is ignored")
    assert "did you mean 'VISIONSTREAM_DECODE_HWACCEL'" in decode
    assert "did you mean 'VISIONSTREAM_MODELS_DIR'" in models
    every_group = {"VISIONSTREAM_SMTP_HOST": "mail", "VISIONSTREAM_VLM_PROVIDERS": "{}"}
    assert environment_notes({**every_group, "VISIONSTREAM_INPUT_VARIANTS": "0"}) == []


def test_old_names_are_read_and_named_in_one_line_and_client_settings_are_told_apart():
    """``STREAMING_*`` was the server's prefix: still read (below ``VISIONSTREAM_*``), with
    one line saying so; a client's setting given to the server is said to be the client's."""
    environ = {
        "STREAMING_API_KEY": "old",
        "STREAMING_SMTP_HOST": "mail.example.test",
        "STREAMING_PORTT": "1",
        "VISIONSTREAM_API_URL": "http://127.0.0.1:9001",
        "PORT": "8080",  # a platform's own variable, named like a setting: not ours to judge
    }
    lines = environment_notes(environ)
    assert lines[0] == (
        "STREAMING_API_KEY, STREAMING_SMTP_HOST: the STREAMING_ prefix is deprecated and "
        "still read; rename them VISIONSTREAM_... (where both are set, VISIONSTREAM_ wins)"
    )
    assert (
        lines[1].startswith("STREAMING_PORTT is not a setting") and "VISIONSTREAM_PORT" in lines[1]
    )
    assert lines[2] == (
        "VISIONSTREAM_API_URL is a client setting (visionstream stream, Client()); "
        "the server does not read it"
    )
    assert len(lines) == 3


def test_a_setting_is_read_under_either_name_and_the_new_one_wins(monkeypatch):
    monkeypatch.setenv("STREAMING_API_KEY", "old")
    monkeypatch.setenv("STREAMING_SMTP_HOST", "old.example.test")
    monkeypatch.setenv("STREAMING_LIMIT_WORKFLOW_STEPS", "7")
    settings = Settings()
    assert settings.api_key is not None and settings.api_key.get_secret_value() == "old"
    assert settings.smtp.host == "old.example.test" and settings.limits.workflow_steps == 7
    monkeypatch.setenv("VISIONSTREAM_API_KEY", "new")
    monkeypatch.setenv("VISIONSTREAM_SMTP_HOST", "new.example.test")
    settings = Settings()
    assert settings.api_key is not None and settings.api_key.get_secret_value() == "new"
    assert settings.smtp.host == "new.example.test"


def test_a_mistyped_workflow_id_is_answered_with_the_nearest(tmp_path):
    library = WorkflowLibrary(tmp_path, "yolov3-tiny-416")
    with pytest.raises(InvalidRequest) as caught:
        library.get("local", "object-detektion")
    message = caught.value.message
    assert message.startswith(
        "workflow 'local/object-detektion' not found; did you mean 'local/object-detection'?"
    )
    assert "workflow_specification" in message and len(message) < 300


def _request(query: str = "") -> Request:
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [],
             "query_string": query.encode(), "client": ("127.0.0.1", 5000)}  # fmt: skip
    return Request(scope)


@pytest.mark.parametrize("sent", ["None", "null", "undefined"])
def test_a_client_given_no_key_is_told_so_not_that_its_key_is_wrong(sent):
    guard = ApiKeyGuard(SecretStr("s3cret"), failures_per_minute=2)
    for _ in range(3):  # not counted as guesses: the right key still gets in below
        with pytest.raises(Unauthorized) as caught:
            guard.check(_request(f"api_key={sent}"))
        assert "none was sent" in caught.value.message and f"'{sent}'" in caught.value.message
    with pytest.raises(Unauthorized, match="invalid API key"):
        guard.check(_request("api_key=wrong"))
    guard.check(_request("api_key=s3cret"))
