"""A session's parts on their own: its notices (bounded errors), its control channel (ACKs,
output switching, the flood limit), in one loop with a real compiled workflow, and the
timestamps of what goes back (results and returned frames count from the same frame)."""

from __future__ import annotations

import asyncio
import gzip
import json
from datetime import datetime
from fractions import Fraction

import av

from streaming.client.pairing import rtp_ticks
from streaming.errors import Notice
from streaming.metrics import Metrics
from streaming.peer.ack import AckGate
from streaming.peer.control import CONTROL_BURST, ControlChannel
from streaming.peer.notices import MAX_PENDING_ERRORS, Notices
from streaming.peer.processor import DataMode, FrameJob, FrameProcessor, OutputSelection
from streaming.peer.tracks import OutboundVideoTrack
from streaming.protocol.workflows import image_blur
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext
from streaming.workflows.runner import FrameFacts

WAIT_S = 10.0


def test_notices_are_bounded_and_the_ending_comes_last():
    notices = Notices()
    for i in range(MAX_PENDING_ERRORS + 5):
        notices.report("x", f"e{i}")
    errors = notices.for_frame()
    assert errors[:MAX_PENDING_ERRORS] == [Notice("x", f"e{i}") for i in range(MAX_PENDING_ERRORS)]
    assert errors[-1] == Notice("errors_suppressed", "5 more errors like these were not listed")
    assert notices.for_frame() == []  # said once
    notices.report_at_end(Notice("source_error", "the camera went away"))
    notices.report("y", "late")
    assert notices.at_end() == [Notice("y", "late"), Notice("source_error", "the camera went away")]
    assert notices.at_end() == []


def test_input_drops_are_said_once_per_new_drop():
    notices = Notices()
    assert notices.for_frame(dropped=0, capacity=8) == []
    assert notices.for_frame(dropped=3, capacity=8) == [
        Notice("input_dropped", "input queue full (8 frames): dropped 3 oldest frames")
    ]
    assert notices.for_frame(dropped=3, capacity=8) == []
    assert notices.for_frame(dropped=4, capacity=8) == [
        Notice("input_dropped", "input queue full (8 frames): dropped 1 oldest frames")
    ]


def _channel(on_flood=lambda: None):
    spec = image_blur()
    workflow = compile_workflow(parse_spec(spec), BuildContext(None))
    selection = OutputSelection.from_request(workflow, ["output_image"], [])
    processor = FrameProcessor(workflow, workflow, selection, jpeg_quality=80, gzip_level=6)
    acks, notices, spawned = AckGate(4, enabled=True), Notices(), []
    control = ControlChannel(
        "test", processor, acks, notices, Metrics(),
        lambda coro: spawned.append(asyncio.ensure_future(coro)), on_flood,
    )  # fmt: skip
    return control, processor, acks, notices, spawned


async def test_an_ack_opens_the_gate_for_the_next_window():
    control, _, acks, _, spawned = _channel()
    control.on_message(json.dumps({"ack": 1}))  # pacing starts with the first ACK
    await asyncio.wait_for(asyncio.gather(*spawned), WAIT_S)
    assert acks.last_ack == 1
    assert await asyncio.wait_for(acks.wait_turn(5), WAIT_S)  # 1 + a window of 4
    asking = asyncio.Event()

    async def sixth() -> bool:
        asking.set()  # its very next step parks it on the gate, before the test resumes
        return await acks.wait_turn(6)

    turn = asyncio.create_task(sixth())
    await asyncio.wait_for(asking.wait(), WAIT_S)
    assert not turn.done()
    control.on_message(json.dumps({"ack": 2}))
    assert await asyncio.wait_for(turn, WAIT_S)


async def test_output_switches_apply_or_say_why_not():
    control, processor, _, notices, _ = _channel()
    control.on_message(json.dumps({"stream_output": ["output_image"]}))
    assert notices.for_frame() == [
        Notice("output_switch_ignored", "stream_output ignored: this session has no video track")
    ]
    control.video_out = True
    control.on_message(json.dumps({"stream_output": ["nowhere"]}))
    (switch,) = notices.for_frame()
    assert switch.message == "stream_output 'nowhere' ignored: not an output of the workflow"
    control.on_message(json.dumps({"stream_output": []}))
    assert processor.selection.stream_output == ""  # raw frames, track kept
    control.on_message(json.dumps({"data_output": ["*"]}))
    assert processor.selection.data_mode is DataMode.ALL
    control.on_message(b"\xff not json")
    assert [n.code for n in notices.for_frame()] == ["invalid_control_message"]


async def test_a_flood_ends_the_session_once_and_later_messages_are_ignored():
    floods: list[int] = []
    control, processor, _, notices, _ = _channel(lambda: floods.append(1))
    for _ in range(CONTROL_BURST + 50):  # far faster than the refill
        control.on_message(json.dumps({"data_output": ["*"]}))
    assert floods == [1] and control.ended
    (flood,) = notices.at_end()
    assert flood.code == "control_message_flood"
    assert flood.message == "more than 200 control messages a second: the session is ended"
    before = processor.selection
    control.on_message(json.dumps({"data_output": []}))
    assert processor.selection is before


def _frame_at(pts: int) -> av.VideoFrame:
    frame = av.VideoFrame(32, 32, "yuv420p")
    frame.pts, frame.time_base = pts, Fraction(1, 90000)
    return frame


def _job(pts: int, render: bool = True) -> FrameJob:
    facts = FrameFacts("webrtc", pts // 3000, datetime.now(), fps=30)
    return FrameJob(_frame_at(pts), facts, 0.0, [], {}, render)


def test_results_and_returned_frames_count_pts_from_the_first_frame_returned():
    # A receiver counts the track's pts from the first frame it gets. A realtime session can
    # drop the first input frames before processing (here those before pts 6000): if
    # messages still counted from the first input, no result would pair with its frame.
    _, processor, _, _, _ = _channel()
    processor.selection = OutputSelection.from_request(processor.workflow, ["output_image"], ["*"])
    timestamps = []
    for pts in (6000, 9000, 15000):
        processed = processor.process(_job(pts))
        message = json.loads(gzip.decompress(processed.payload))
        video = processed.video_frame
        assert video is not None
        timestamps.append((message["video_metadata"]["pts"], rtp_ticks(video.pts, video.time_base)))
    assert timestamps == [(0, 0), (3000, 3000), (9000, 9000)]


def test_without_returned_video_results_keep_the_input_pts():
    _, processor, _, _, _ = _channel()
    processed = processor.process(_job(6000, render=False))
    assert processed.video_frame is None
    assert json.loads(processed.payload)["video_metadata"]["pts"] == 6000


async def test_the_first_returned_frame_is_never_replaced_before_it_is_sent():
    # What the pts origin above relies on: the first frame processed is the first one sent,
    # even by a realtime session's track, where a newer frame replaces one not yet sent.
    track = OutboundVideoTrack("latest", 1)
    await track.publish(_frame_at(0))
    second = asyncio.ensure_future(track.publish(_frame_at(3000)))
    # A yield, not a timed wait: the second publish's task runs up to where it blocks.
    await asyncio.sleep(0)
    assert not second.done()
    assert (await asyncio.wait_for(track.recv(), WAIT_S)).pts == 0
    await asyncio.wait_for(second, WAIT_S)
    await track.publish(_frame_at(6000))  # from now on the newest wins
    assert (await asyncio.wait_for(track.recv(), WAIT_S)).pts == 6000
    await track.finish()


def _result(frame_id: int, **extra) -> bytes:
    from streaming.protocol.messages import ResultMessage

    metadata = {"frame_id": frame_id, "received_at": datetime.now().isoformat(), **extra}
    return ResultMessage(metadata, {"n": frame_id}, ["e"] if extra else []).to_json()


async def test_a_realtime_client_keeps_the_newest_messages_when_its_handlers_lag():
    """The client's inbox is bounded: a program slower than the server loses the oldest
    result messages (counted), never the completion; messages are parsed into typed ones,
    their error codes into ``NoticeCode`` members."""
    from streaming.client import ManualSource, StreamConfig
    from streaming.client.session import AsyncWebRTCSession
    from streaming.protocol.chunking import iter_chunks
    from streaming.protocol.messages import ResultMessage
    from streaming.protocol.notices import NoticeCode

    session = AsyncWebRTCSession(
        api_url="http://127.0.0.1:9", api_key=None, source=ManualSource(),
        workflow_config={}, image_input="image", config=StreamConfig(), inbox_messages=4,
    )  # fmt: skip
    receiver = session._receiver
    for frame_id in range(1, 11):  # nobody dispatches: the program is "busy"
        for chunk in iter_chunks(frame_id, _result(frame_id)):
            receiver.receive(chunk)
    receiver.receive(ResultMessage.completion(10, None).to_json().decode())
    assert session.stats.messages_dropped == 7
    kept = [receiver._decode(receiver._inbox.get_nowait()) for _ in range(4)]
    assert [m.metadata().frame_id for m in kept[:3]] == [8, 9, 10]
    assert kept[3].processing_complete
    coded = receiver._decode(_result(1, error_codes=["workflow_error", "from_the_future"]))
    assert coded.metadata().error_codes == [NoticeCode.WORKFLOW_ERROR, "from_the_future"]
    assert receiver._decode(b'{"errors": []}') is None  # no video_metadata: said and skipped
    assert session.stats.malformed_messages == 1
