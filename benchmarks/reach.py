"""Reach: what a TURN relay costs against host candidates, and WHIP publish -> WHEP playback.

1. **TURN vs host**, alternated in one run against one server: our client streams the
   stamped 640x480 30 fps feed through the blur workflow, either with host candidates or
   relay-only through a real coturn on 127.0.0.1 (the server then relays too: it uses the
   TURN server the client sent). Connect time is ``stream()`` to the first returned frame
   (ICE gathering with its TURN allocations, checks, DTLS, the first frame); latency is
   glass to glass, from each frame's stamp.
2. **WHIP -> WHEP**: an aiortc peer publishes the stamped feed over WHIP to the stored
   ``local/image-blur`` workflow, another plays the resource over WHEP; latency is from the
   publisher's stamp to the player's decoded frame, one clock. Plain HTTP and SDP, as any
   WHIP publisher and WHEP player would do it.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks reach'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from aiortc import RTCPeerConnection, RTCSessionDescription

from benchmarks.common import percentiles, write_result
from sources import SyntheticSource, decode_stamp
from streaming import Client, StreamConfig
from streaming.client import FrameSourceStream
from streaming.protocol.workflows import image_blur
from streaming.rtc.ice import build_configuration, restrict_host_addresses
from streaming.rtc.track import FrameSourceTrack, received_frames
from tests.support.server import ServerProcess
from tests.support.turn import TurnServer

SIZE = (640, 480)
FPS = 30.0


def feed(frames: int | None) -> FrameSourceStream:
    return FrameSourceStream(lambda: SyntheticSource(*SIZE, fps=FPS, frames=frames))


def session_run(url: str, config: StreamConfig, frames: int, warmup: int) -> dict:
    """One session: seconds to its first returned frame, and each frame's age."""
    ages: dict[int, float] = {}
    started = time.perf_counter()
    connect_s = None
    with Client(url).webrtc.stream(
        feed(warmup + frames), workflow=image_blur(), config=config
    ) as s:
        for frame, _ in s.video():
            if connect_s is None:
                connect_s = time.perf_counter() - started
            stamp = decode_stamp(frame)
            if stamp is not None and stamp.index >= warmup:
                ages.setdefault(stamp.index, stamp.age_ms())
        types = s.candidate_types
    return {
        "connect_s": round(connect_s or float("nan"), 3),
        "frames_back": len(ages),
        "latency_ms": percentiles([ages[i] for i in sorted(ages)]),
        "candidates": {side: sorted(kinds) for side, kinds in types.items()},
    }


def turn_vs_host(url: str, turn: TurnServer, rounds: int, frames: int, warmup: int) -> list:
    base = {"stream_output": ["output_image"], "data_output": []}
    paths = {
        "host": StreamConfig(**base),
        "relay": StreamConfig(
            **base, turn_server=turn.ice_server("udp"), ice_transport_policy="relay"
        ),
    }
    rows = []
    for round_ in range(rounds):
        for path, config in paths.items():
            row = {"path": path, "round": round_, **session_run(url, config, frames, warmup)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


async def whip_to_whep(url: str, frames: int, warmup: int) -> dict:
    """Publisher and player as plain WHIP/WHEP peers (aiortc), the blur workflow between."""
    publisher = RTCPeerConnection(build_configuration([], []))
    player = RTCPeerConnection(build_configuration([], []))
    track = FrameSourceTrack(SyntheticSource(*SIZE, fps=FPS, frames=None))
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        try:
            publisher.addTransceiver(track, direction="sendonly")
            started = time.perf_counter()
            resource = await _exchange(http, publisher, "/whip/workflows/local/image-blur")
            player.addTransceiver("video", direction="recvonly")
            arrived: asyncio.Queue = asyncio.Queue()
            player.on("track", lambda t: arrived.put_nowait(t))
            session = await _exchange(http, player, f"/whep/resources/{resource.rsplit('/', 1)[1]}")
            remote = await asyncio.wait_for(arrived.get(), 60)
            ages: dict[int, float] = {}
            first_s = None
            async for frame in received_frames(remote):
                if first_s is None:
                    first_s = time.perf_counter() - started
                stamp = decode_stamp(frame.to_ndarray(format="bgr24"))
                if stamp is None:
                    continue
                if stamp.index >= warmup:
                    ages.setdefault(stamp.index, stamp.age_ms())
                if len(ages) >= frames:
                    break
            await http.delete(session)
            await http.delete(resource)
        finally:
            await player.close()
            await publisher.close()
            track.stop()
    return {
        "publish_to_first_played_s": round(first_s or float("nan"), 3),
        "frames_measured": len(ages),
        "latency_ms": percentiles([ages[i] for i in sorted(ages)]),
    }


async def _exchange(http: httpx.AsyncClient, pc: RTCPeerConnection, path: str) -> str:
    await pc.setLocalDescription(await pc.createOffer())
    response = await http.post(
        path, content=pc.localDescription.sdp, headers={"Content-Type": "application/sdp"}
    )
    assert response.status_code == 201, response.text
    await pc.setRemoteDescription(RTCSessionDescription(response.text, "answer"))
    return response.headers["location"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks reach", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=60)
    args = parser.parse_args(argv)
    restrict_host_addresses(["127.0.0.1"])
    with tempfile.TemporaryDirectory() as scratch:
        turn = TurnServer(Path(scratch) / "turn")
        server = ServerProcess()
        try:
            server.wait_ready()
            rows = turn_vs_host(server.url, turn, args.rounds, args.frames, args.warmup)
            whip = [
                asyncio.run(whip_to_whep(server.url, args.frames, args.warmup))
                for _ in range(args.rounds)
            ]
            for row in whip:
                print(json.dumps(row), flush=True)
        finally:
            server.stop()
            turn.stop()
    summary = {
        path: {
            "connect_s_median": float(
                np.median([r["connect_s"] for r in rows if r["path"] == path])
            ),
            "p50_ms_median": float(
                np.median([r["latency_ms"]["p50"] for r in rows if r["path"] == path])
            ),
        }
        for path in ("host", "relay")
    }
    print(json.dumps(summary))
    path = write_result("reach", {"frames": args.frames, "size": list(SIZE), "turn_vs_host": rows,
                                  "summary": summary, "whip_to_whep": whip})  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
