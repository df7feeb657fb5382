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


def test_output_frames_keep_the_input_rtp_timestamp_exactly():
    """aiortc's VP8 encoder rebases to µs and truncates back: the result must equal the input."""
    import fractions

    import av
    import numpy as np
    from aiortc.codecs import get_encoder
    from aiortc.rtcrtpparameters import RTCRtpCodecParameters

    from streaming.peer.processor import _yuv420p_frame, wire_timestamp

    encoder = get_encoder(
        RTCRtpCodecParameters(mimeType="video/VP8", clockRate=90000, payloadType=96)
    )
    for pts in (0, 2999, 3000, 6001, 123_457, 2**31 + 11):
        frame = _yuv420p_frame(np.zeros((48, 64, 3), np.uint8))
        frame.pts, frame.time_base = wire_timestamp(pts, fractions.Fraction(1, 90000))
        _, timestamp = encoder.encode(frame)
        assert timestamp == pts
    odd = _yuv420p_frame(np.zeros((49, 63, 3), np.uint8))
    assert isinstance(odd, av.VideoFrame) and (odd.width, odd.height) == (63, 49)
