"""Sessions through a real TURN relay (Debian's coturn), on 127.0.0.1.

With the relay-only policy a peer offers relayed candidates only, so when both sides use it
(or the server alone, whatever the client offers) every packet goes through coturn: that a
session streams and returns results then proves the relay path, over UDP, TCP and TLS. Wrong
credentials must fail at once with a message that says so, never at the connect timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from streaming import Client, SessionStartError, StreamConfig
from tests.conftest import DETECT_SPEC
from tests.e2e.test_client import synthetic
from tests.support.peer import data_channel_offer
from tests.support.server import running_server
from tests.support.turn import PASSWORD, USER, TurnServer

pytestmark = pytest.mark.e2e

FRAMES = 12


@pytest.fixture(scope="module")
def turn(tmp_path_factory) -> Iterator[TurnServer]:
    server = TurnServer(tmp_path_factory.mktemp("turn"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def ca_file(turn, monkeypatch) -> None:
    """Our client (this process) trusts coturn's certificate for ``turns:``."""
    monkeypatch.setenv("SSL_CERT_FILE", str(turn.ca_file))


def relay_config(turn: TurnServer, transport: str = "udp", **changes) -> StreamConfig:
    fields = {
        "stream_output": ["annotated"],
        "data_output": ["predictions"],
        "realtime_processing": False,
        "turn_server": turn.ice_server(transport),
        "ice_transport_policy": "relay",
    }
    return StreamConfig(**{**fields, **changes})


def stream_through(url: str, config: StreamConfig) -> tuple[list, dict]:
    """Every frame's predictions (the session processes every one), and the candidate types
    each side offered."""
    session = Client(url).webrtc.stream(synthetic(FRAMES), workflow=DETECT_SPEC, config=config)
    results: list = []
    session.on_data("predictions")(results.append)
    with session:
        session.run()
        return results, session.candidate_types


@pytest.mark.parametrize("transport", ["udp", "tcp", "tls"])
def test_a_session_whose_peers_reach_each_other_only_through_the_relay_streams(
    turn, ca_file, transport
):
    allocations = turn.allocations()
    with running_server(
        {"SSL_CERT_FILE": str(turn.ca_file)},
        ice_servers=turn.url(transport),
        ice_username=USER,
        ice_credential=PASSWORD,
        ice_transport_policy="relay",
    ) as server:
        results, types = stream_through(server.url, relay_config(turn, transport))
        health = server.get("/healthz").json()
        log = "\n".join(server.lines)
    assert len(results) == FRAMES
    assert types == {"local": {"relay"}, "remote": {"relay"}}
    assert turn.allocations() >= allocations + 2  # one per peer
    assert health["ice"] == {
        "servers": [turn.url(transport)],
        "username": USER,
        "credential": "***",
        "policy": "relay",
        "client_servers_allowed": True,
    }
    assert PASSWORD not in log


def test_a_relay_only_server_uses_the_turn_server_the_client_sent(turn):
    """No TURN server of its own: the client's (``webrtc_config.iceServers``) carries it."""
    with running_server(ice_transport_policy="relay") as server:
        results, types = stream_through(server.url, relay_config(turn, ice_transport_policy="all"))
    assert len(results) == FRAMES
    assert types["remote"] == {"relay"}
    assert "host" in types["local"]


def test_wrong_turn_credentials_fail_at_once_saying_so(turn):
    with running_server(
        ice_servers=turn.url("udp"),
        ice_username=USER,
        ice_credential="not-the-password",
        ice_transport_policy="relay",
    ) as server:
        # Our client's own credentials are wrong: it says so before sending its offer.
        config = relay_config(turn)
        config.turn_server = {**turn.ice_server(), "credential": "also-wrong"}
        with pytest.raises(SessionStartError, match="refused the credentials of user"):
            stream_through(server.url, config)
        assert server.sessions() == 0
        # The server's are wrong: its answer is a 502 naming the TURN server and the reason.
        with pytest.raises(SessionStartError) as raised:
            stream_through(server.url, StreamConfig(data_output=["predictions"]))
        message = str(raised.value)
        assert "turn_unavailable" in message or "gave no relay candidate" in message
        assert f"refused the credentials of user '{USER}'" in message
        assert server.sessions() == 0
        log = "\n".join(server.lines)
    assert "not-the-password" not in log and "also-wrong" not in log


def test_a_relay_only_server_with_no_turn_server_refuses_the_session_saying_why():
    with running_server(ice_transport_policy="relay") as server:
        response = httpx.post(
            server.url + "/initialise_webrtc_worker",
            json={
                "workflow_configuration": {"workflow_specification": DETECT_SPEC},
                "webrtc_offer": {"type": "offer", "sdp": asyncio.run(data_channel_offer())},
            },
            timeout=30,
        )
    assert response.status_code == 502
    assert response.json()["code"] == "turn_unavailable"
    assert "no TURN server is configured or was sent" in response.json()["message"]


def test_a_whip_publisher_learns_the_relay_from_the_link_header_and_publishes_through_it(turn):
    """WHIP's way to hand a publisher the ICE servers: ``Link: <turn:...>; rel="ice-server"``
    with credentials. A relay-only publisher must use them: the server is relay-only too."""
    with running_server(
        ice_servers=turn.url("udp"),
        ice_username=USER,
        ice_credential=PASSWORD,
        ice_transport_policy="relay",
    ) as server:
        results, links = asyncio.run(_publish_through_relay(server.url, turn))
    assert results, "no result of the relayed stream"
    (link,) = links
    assert link["url"] == turn.url("udp") and link["username"] == USER
    assert link["credential"] == PASSWORD  # to the key holder only: this server has no key


async def _publish_through_relay(url: str, turn: TurnServer) -> tuple[list, list[dict]]:
    from aiortc import RTCPeerConnection, RTCSessionDescription

    from sources import SyntheticSource
    from streaming.protocol.messages import IceServer
    from streaming.rtc.ice import build_configuration
    from streaming.rtc.track import FrameSourceTrack

    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        # An OPTIONS-less publisher: the first POST's Link header is where it learns the
        # relay; a relay-only publisher then offers again with it.
        learner = RTCPeerConnection(build_configuration([], []))
        learner.addTransceiver("video", direction="sendonly")
        await learner.setLocalDescription(await learner.createOffer())
        first = await http.post(
            "/whip/workflows/local/image-blur",
            content=learner.localDescription.sdp,
            headers={"Content-Type": "application/sdp"},
        )
        await learner.close()
        assert first.status_code == 201, first.text
        await http.delete(first.headers["location"])
        links = [_parse_link(value) for value in first.headers["link"].split(", ")]
        servers = [IceServer(urls=[k["url"]], username=k["username"], credential=k["credential"])
                   for k in links]  # fmt: skip
        publisher = RTCPeerConnection(build_configuration([], servers, policy="relay"))
        track = FrameSourceTrack(SyntheticSource(320, 240, fps=15, frames=None))
        try:
            publisher.addTransceiver(track, direction="sendonly")
            await publisher.setLocalDescription(await publisher.createOffer())
            sdp = publisher.localDescription.sdp
            assert {line.split()[7] for line in sdp.splitlines() if " typ " in line} == {"relay"}
            response = await http.post(
                "/whip/workflows/local/image-blur",
                content=sdp,
                headers={"Content-Type": "application/sdp"},
            )
            assert response.status_code == 201, response.text
            await publisher.setRemoteDescription(RTCSessionDescription(response.text, "answer"))
            pipeline_id = (await http.get("/inference_pipelines/list")).json()["pipelines"][0]
            consumed = await http.request(
                "GET", f"/inference_pipelines/{pipeline_id}/consume", json={"wait_seconds": 20}
            )
            await http.delete(response.headers["location"])
            return consumed.json()["outputs"], links
        finally:
            await publisher.close()
            track.stop()


def _parse_link(value: str) -> dict[str, str]:
    url, *params = [part.strip() for part in value.split(";")]
    fields = dict(p.split("=", 1) for p in params)
    assert fields["rel"] == '"ice-server"'
    return {
        "url": url.strip("<>"),
        "username": fields["username"].strip('"'),
        "credential": fields["credential"].strip('"'),
    }


def test_the_command_line_relays_through_turn_and_says_when_the_password_is_wrong(turn):
    import os
    import subprocess
    import sys

    def stream(password: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "streaming.cli", "stream", "--source", "synthetic:320x240@15",
             "--frames", "5", "--no-realtime", "--api-url", server.url,
             "--turn", turn.url("tcp"), "--turn-user", USER, "--relay-only"],
            env={**os.environ, "VISIONSTREAM_TURN_PASSWORD": password},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    with running_server(ice_transport_policy="relay") as server:
        done = stream(PASSWORD)
        refused = stream("not-it")
    assert done.returncode == 0, done.stderr
    assert "frames 5" in done.stderr
    assert refused.returncode == 1 and "refused the credentials" in refused.stderr
    assert "Traceback" not in refused.stderr and "not-it" not in refused.stderr
