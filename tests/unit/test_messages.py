import json

import pytest

from streaming.protocol.messages import WebRTCWorkerRequest, parse_control_message

OFFER = {"type": "offer", "sdp": "v=0"}
WF = {"type": "WorkflowConfiguration", "workflow_specification": {}}


def test_request_ignores_unknown_keys_and_accepts_both_url_forms():
    request = WebRTCWorkerRequest.model_validate(
        {
            "workflow_configuration": WF,
            "webrtc_offer": OFFER,
            "manual_mode": True,
            "video_file_upload": True,
            "webrtc_config": {"iceServers": [{"urls": "turn:a"}, {"urls": ["stun:b", "stun:c"]}]},
        }
    )
    assert [s.urls for s in request.ice_servers()] == [["turn:a"], ["stun:b", "stun:c"]]
    assert request.webrtc_realtime_processing is True
    assert request.stream_output is None and request.data_output is None


def test_legacy_turn_config_replaces_ice_servers():
    request = WebRTCWorkerRequest.model_validate(
        {
            "workflow_configuration": WF,
            "webrtc_offer": OFFER,
            "webrtc_config": {"iceServers": [{"urls": "stun:x"}]},
            "webrtc_turn_config": {"urls": "turn:t", "username": "u", "credential": "c"},
        }
    )
    assert [s.urls for s in request.ice_servers()] == [["turn:t"]]


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"\xff\xfe", "not JSON"),
        ("{", "not JSON"),
        ("[1]", "JSON object"),
        ('{"ack": "3"}', "ack"),
        ('{"ack": -1}', "ack"),
        ('{"ack": 1.5}', "ack"),
        ('{"data_output": "predictions"}', "data_output"),
        (json.dumps({"ack": 1, "pad": "x" * 70_000}), "exceeds"),
    ],
)
def test_hostile_control_messages_are_rejected_with_a_reason(raw, needle):
    with pytest.raises(ValueError, match=needle):
        parse_control_message(raw)


def test_control_message_fields():
    message = parse_control_message('{"ack": 4, "stream_output": [], "data_output": ["*"], "x": 1}')
    assert (message.ack, message.stream_output, message.data_output) == (4, [], ["*"])
