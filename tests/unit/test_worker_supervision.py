"""A session whose own task fails ends at once, telling its client why (in-process: one
PeerWorker and one aiortc client peer in this loop; the fault is injected at the processor)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from aiortc import RTCSessionDescription

from streaming.config import Settings
from streaming.metrics import Metrics
from streaming.peer.processor import FrameJob, FrameProcessor, OutputSelection, ProcessedFrame
from streaming.peer.session_config import SessionConfig
from streaming.peer.worker import PeerWorker
from streaming.protocol.messages import WebRTCOffer, WebRTCWorkerRequest
from streaming.protocol.workflows import image_blur
from streaming.rtc.ice import restrict_host_addresses
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext
from tests.support.peer import LoopbackPeer

WAIT_S = 30.0


class BrokenProcessor(FrameProcessor):
    """Raises on the third frame, as a bug of ours would."""

    def process(self, job: FrameJob) -> ProcessedFrame:
        if job.facts.frame_number == 3:
            raise RuntimeError("a bug in processing")
        return super().process(job)


async def test_a_failed_session_task_sends_a_completion_and_frees_the_slot(caplog):
    restrict_host_addresses(["127.0.0.1"])
    spec = image_blur()
    workflow = compile_workflow(parse_spec(spec), BuildContext(None))
    processor = BrokenProcessor(
        workflow,
        workflow,
        OutputSelection.from_request(workflow, ["output_image"], []),
        jpeg_quality=80,
        gzip_level=6,
    )
    client = LoopbackPeer("http://unused")
    body = await client.offer_body(spec=spec, stream_output=["output_image"], data_output=[])
    request = WebRTCWorkerRequest.model_validate(body)
    closed = asyncio.Event()
    with ThreadPoolExecutor(1) as executor:
        worker = PeerWorker(
            SessionConfig.of(Settings()),
            request,
            processor,
            executor,
            Metrics(),
            lambda _: closed.set(),
        )
        try:
            answer = await worker.start(WebRTCOffer(**body["webrtc_offer"]), caller="127.0.0.1")
            await client.pc.setRemoteDescription(RTCSessionDescription(answer.sdp, answer.type))
            assert client.track is not None
            for _ in range(5):
                client.track.send(np.full((96, 128, 3), 90, np.uint8))
            await client.wait_for(
                lambda: any(r.get("processing_complete") for r in client.results), WAIT_S
            )
            await asyncio.wait_for(closed.wait(), WAIT_S)  # the slot is freed without waiting
        finally:
            await worker.close()
            await client.close()
    completion = client.results[-1]
    assert completion["termination_reason"] == "internal_error"
    assert completion["video_metadata"]["frame_id"] == 2
    notice = client.results[-2]
    assert any("internal error in _session_loop (RuntimeError)" in e for e in notice["errors"])
    assert "internal_error" in notice["video_metadata"]["error_codes"]
    assert "a bug in processing" not in str(client.results)  # our internals stay in our log
    assert "a bug in processing" in caplog.text
