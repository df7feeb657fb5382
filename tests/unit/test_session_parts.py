"""A session's parts on their own: its notices (bounded errors) and its control channel (ACKs,
output switching, the flood limit), in one loop with a real compiled workflow."""

from __future__ import annotations

import asyncio
import json

from streaming.errors import Notice
from streaming.metrics import Metrics
from streaming.peer.ack import AckGate
from streaming.peer.control import CONTROL_BURST, ControlChannel
from streaming.peer.notices import MAX_PENDING_ERRORS, Notices
from streaming.peer.processor import DataMode, FrameProcessor, OutputSelection
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext
from streaming.workflows.library import image_blur

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
    processor = FrameProcessor(workflow, selection, declared_fps=30, jpeg_quality=80, gzip_level=6)
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
