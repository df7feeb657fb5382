"""``slack_notification@v1`` against Slack's Web API played by a real HTTP server on loopback
(``tests/support/slack.py``): text with its parameters, files through Slack's upload flow,
the token from a parameter or a lent secret and nowhere else, the cooldown, and the egress
policy on every address, the upload URL Slack answers with included."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.inference.registry import ModelRegistry
from streaming.settings.notifications import SlackSettings
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from tests.support.slack import CHANNEL, TOKEN, SlackApi


def slack_step(**fields) -> dict:
    return {
        "type": "roboflow_core/slack_notification@v1",
        "name": "slack",
        "slack_token": "$inputs.token",
        "channel": CHANNEL,
        "cooldown_session_key": "session-1",
        "message": "hi",
        **fields,
    }


def spec_of(*steps: dict) -> dict:
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "token"},
            {"type": "WorkflowParameter", "name": "names"},
        ],
        "steps": list(steps),
        "outputs": [{"type": "JsonField", "name": "sent", "selector": "$steps.slack.*"}],
    }


def settings_for(api: SlackApi, tmp_path) -> Settings:
    return Settings(
        models_dir=tmp_path,
        slack=SlackSettings(api_url=api.api_url),
        allowed_networks="127.0.0.1/32",
    )


def run_frames(spec: dict, settings: Settings, frames: int = 1, **parameters) -> list[dict]:
    """Each frame's outputs; the workflow closed (what it queued sent) before returning."""
    registry = ModelRegistry(settings)
    workflow = compile_workflow(
        parse_spec(spec), BuildContext(registry, settings=settings), parameters=parameters
    )
    image = np.full((48, 64, 3), (0, 0, 255), np.uint8)
    try:
        return [workflow.run(image, {}, FrameState())["sent"] for _ in range(frames)]
    finally:
        workflow.close()
        registry.close()


SENT = {
    "error_status": False,
    "throttling_status": False,
    "message": "Notification sent in the background",
}


def test_a_message_with_its_parameters_is_posted_then_the_cooldown_holds_the_next(tmp_path):
    step = slack_step(
        message="Seen {{ $parameters.count }}: {{ $parameters.names }}. {{ $parameters.none }}",
        message_parameters={"count": "$inputs.names", "names": "$inputs.names"},
        message_parameters_operations={"count": [{"type": "SequenceLength"}]},
    )
    with SlackApi() as api:
        first, second = run_frames(
            spec_of(step), settings_for(api, tmp_path), 2, token=TOKEN, names=["dog", "cat"]
        )
        (call,) = api.wait_calls("chat.postMessage", 1)
    assert first == SENT
    assert second == {
        "error_status": False,
        "throttling_status": True,
        "message": "Sink cooldown applies",
    }
    assert call.authorization == f"Bearer {TOKEN}"
    assert call.body == {
        "channel": CHANNEL,
        "text": "Seen 2: ['dog', 'cat']. {{ $parameters.none }}",
    }
    assert len(api.of("chat.postMessage")) == 1


def test_files_go_through_slacks_upload_flow_with_the_text_as_their_comment(tmp_path):
    step = slack_step(
        message="Report attached",
        attachments={"report.csv": "$inputs.names", "frame": "$inputs.image"},
        cooldown_seconds=0,
    )
    with SlackApi() as api:
        (sent,) = run_frames(
            spec_of(step), settings_for(api, tmp_path), token=TOKEN, names="a,b\n1,2\n"
        )
        tickets = api.wait_calls("files.getUploadURLExternal", 2)
        uploads = api.wait_calls("upload", 2)
        (done,) = api.wait_calls("files.completeUploadExternal", 1)
    assert sent == SENT
    assert [t.body["filename"] for t in tickets] == ["report.csv", "frame.jpg"]
    assert uploads[0].body == b"a,b\n1,2\n"
    assert [int(t.body["length"]) for t in tickets] == [len(u.body) for u in uploads]
    picture = cv2.imdecode(np.frombuffer(uploads[1].body, np.uint8), cv2.IMREAD_COLOR)
    assert picture.shape == (48, 64, 3) and picture[..., 2].mean() > 200  # the red frame
    assert done.body["channel_id"] == CHANNEL
    assert done.body["initial_comment"] == "Report attached"
    assert [f["title"] for f in json.loads(done.body["files"])] == ["report.csv", "frame.jpg"]
    assert not api.of("chat.postMessage")


def test_an_upload_url_outside_the_egress_policy_is_never_reached(tmp_path):
    # Slack's answer names where to upload: that address passes the policy as any other.
    step = slack_step(message="x", attachments={"a.txt": "$inputs.names"}, cooldown_seconds=0)
    with SlackApi(upload_host="127.0.0.2") as api:
        run_frames(spec_of(step), settings_for(api, tmp_path), token=TOKEN, names="hello")
        api.wait_calls("files.getUploadURLExternal", 1)
        assert not api.of("upload") and not api.of("files.completeUploadExternal")


def test_slacks_refusals_are_its_own_and_nothing_else_is_sent(tmp_path):
    with SlackApi() as api:
        settings = settings_for(api, tmp_path)
        (sent,) = run_frames(spec_of(slack_step(message="hi")), settings, token="xoxb-wrong")
        (refused,) = api.wait_calls("chat.postMessage", 1)
        assert sent == SENT  # fire and forget: the frame never waits on Slack
        assert api.reply(refused) == {"ok": False, "error": "invalid_auth"}
        (sent,) = run_frames(
            spec_of(slack_step(message="hi", channel="#nowhere")), settings, token=TOKEN
        )
        assert api.wait_calls("chat.postMessage", 2)[1].body["channel"] == "#nowhere"


def test_the_token_comes_from_a_lent_secret_and_never_goes_into_the_text(tmp_path, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    vault = {
        "type": "roboflow_core/environment_secrets_store@v1",
        "name": "vault",
        "variables_storing_secrets": ["SLACK_BOT_TOKEN"],
    }
    with SlackApi() as api:
        settings = settings_for(api, tmp_path).model_copy(
            update={"workflow_secrets": ["SLACK_BOT_TOKEN"]}
        )
        step = slack_step(message="hi", slack_token="$steps.vault.slack_bot_token")
        run_frames(spec_of(vault, step), settings)
        (call,) = api.wait_calls("chat.postMessage", 1)
        assert call.authorization == f"Bearer {TOKEN}" and TOKEN not in json.dumps(call.body)
        leaking = slack_step(
            message="{{ $parameters.t }}", message_parameters={"t": "$steps.vault.slack_bot_token"}
        )
        with pytest.raises(WorkflowCompilationError, match="is a lent secret"):
            run_frames(spec_of(vault, leaking), settings, token=TOKEN)


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"cooldown_seconds": 901}, "cooldown_seconds must be"),
        ({"message": None}, "message"),
        ({"channel": None}, "field 'channel' is required"),
    ],
)
def test_what_the_reference_refuses_is_a_400_naming_the_field(tmp_path, fields, needle):
    with SlackApi() as api, pytest.raises(WorkflowCompilationError, match=needle):
        run_frames(spec_of(slack_step(**fields)), settings_for(api, tmp_path), token=TOKEN)
