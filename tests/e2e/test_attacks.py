"""What an attacker found against the real server (issue 37), each now refused precisely while
the server goes on serving: camera addresses in unauthenticated health, forwarded addresses
believed from anyone, trickled bodies, bodies read before a wrong key, unbounded connections,
JSON nested past the parser, model ids as file names, and offers of thousands of candidates."""

from __future__ import annotations

import re
import select
import socket
import time

import httpx
import pytest

from tests.conftest import DETECT_SPEC
from tests.support.peer import data_channel_offer
from tests.support.server import ServerProcess, free_port, running_server, wait_for

pytestmark = pytest.mark.e2e

KEY = "attack-s3cret-key"
BEARER = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def keyed_server():
    """The API key set; a body may pause 2 s between parts and must be whole within 4 s;
    the access log on (its line for a request says the request's logging is done)."""
    with running_server(api_key=KEY, http_body_timeout_s="2", http_body_deadline_s="4",
                        access_log="true") as process:  # fmt: skip
        yield process


@pytest.fixture(scope="module")
def logged_server():
    """No key; the access log on, as ``keyed_server``'s."""
    with running_server(access_log="true") as process:
        yield process


def _socket(server: ServerProcess, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), source_address=(source, 0))
    sock.settimeout(30)  # a hang bound far above the server's own limits
    return sock


def _answer(sock: socket.socket) -> bytes:
    answer = b""
    while chunk := sock.recv(4096):
        answer += chunk
    return answer


def test_health_without_the_key_shows_no_camera_address(keyed_server):
    port = free_port()  # nothing listens: the camera stays reconnecting
    camera = f"rtmp://admin:hunter2@127.0.0.1:{port}/live/STREAMKEY-abc123?sig=SIGSECRET&token=tok"
    started = keyed_server.start_pipeline(camera, DETECT_SPEC, api_key=KEY)
    assert started.status_code == 200, started.text
    pipeline_id = started.json()["context"]["pipeline_id"]
    try:

        def shown() -> str | None:
            health = httpx.get(f"{keyed_server.url}/healthz", headers=BEARER, timeout=10).json()
            urls = [s["url"] for s in health["sources"] if f":{port}/" in s["url"]]
            return urls[0] if urls else None

        assert wait_for(shown, 30, "the camera in health") == (
            f"rtmp://***@127.0.0.1:{port}/live/***?sig=***&token=***"
        )
        public = httpx.get(f"{keyed_server.url}/healthz", timeout=10)
        assert public.status_code == 200
        for secret in ("hunter2", "admin", "STREAMKEY", "SIGSECRET", "=tok", f":{port}", "rtmp"):
            assert secret not in public.text, secret
        assert public.json()["sessions"] >= 0 and "ice" not in public.json()
    finally:
        path = f"/inference_pipelines/{pipeline_id}/terminate"
        assert keyed_server.post(path, json={"api_key": KEY}).status_code == 200


def test_forwarded_addresses_are_believed_only_from_a_named_proxy():
    """From anyone else, ``X-Forwarded-For`` changes nothing: the wrong-key throttle and the
    session cap count the connection's own address."""
    with running_server(
        api_key=KEY, auth_failures_per_minute="3", trusted_proxies="127.0.0.5"
    ) as server:
        url = f"{server.url}/models"
        wrong = {"Authorization": "Bearer guess"}
        with httpx.Client(timeout=10) as client:  # 127.0.0.1, no proxy
            for n in range(3):
                forged = {**wrong, "X-Forwarded-For": f"127.0.1.{n}"}
                assert client.get(url, headers=forged).status_code == 401
            fresh = {**BEARER, "X-Forwarded-For": "127.0.1.99"}
            throttled = client.get(url, headers=fresh)
        assert throttled.status_code == 429, throttled.text
        assert "127.0.0.1" in throttled.json()["message"]
        proxy = httpx.HTTPTransport(local_address="127.0.0.5")
        with httpx.Client(transport=proxy, timeout=10) as client:  # the named proxy
            forwarded = {**wrong, "X-Forwarded-For": "127.0.2.1"}
            for _ in range(3):
                assert client.get(url, headers=forwarded).status_code == 401
            behind = client.get(url, headers=forwarded)
            assert behind.status_code == 429 and "127.0.2.1" in behind.json()["message"]
            other = client.get(url, headers={**BEARER, "X-Forwarded-For": "127.0.2.2"})
            assert other.status_code == 200, other.text


def test_a_body_trickled_a_byte_at_a_time_is_cut_off_at_its_deadline(keyed_server):
    """Each byte comes well within the 2 s a body may pause; the whole is due in 4 s. The
    trickle stops a second before that (a byte reaching a socket the server has closed is
    answered with a reset, which discards the 408 unread): a server without the deadline
    would answer later, when the body has paused 2 s, and say so instead."""
    with _socket(keyed_server) as sock:
        sock.sendall(
            b"POST /initialise_webrtc_worker HTTP/1.1\r\nHost: x\r\nContent-Type: "
            b"application/json\r\nContent-Length: 5000\r\n\r\n"
        )
        started = time.monotonic()
        answered = False
        while not answered and time.monotonic() - started < 3.0:
            sock.sendall(b" ")
            answered = bool(select.select([sock], [], [], 0.5)[0])  # paced by the wait
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b"not complete within 4 s" in answer
    assert time.monotonic() - started < 25
    assert keyed_server.get("/healthz").status_code == 200


def test_a_wrong_key_in_the_header_is_refused_before_the_body_is_read(keyed_server):
    """The body never comes: a server that waited for it would answer 408 when it stalled
    (2 s here); the 401 is the key judged from the header alone."""
    with _socket(keyed_server, "127.0.0.9") as sock:  # its own address: its own throttle
        sock.sendall(
            b"POST /workflows/run HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer guess\r\n"
            b"Content-Type: application/json\r\nContent-Length: 50000\r\n\r\n{"
        )
        answer = sock.recv(4096)
        while b"}" not in answer and (more := sock.recv(4096)):  # the body, when apart
            answer += more
    assert answer.startswith(b"HTTP/1.1 401"), answer[:300]
    assert b"invalid API key" in answer


def test_connections_past_the_cap_are_answered_503_and_the_rest_served():
    with running_server(max_connections="3") as server:
        held = [_socket(server) for _ in range(3)]
        try:
            refused = wait_for(
                lambda: (r := server.get("/healthz")).status_code == 503 and r,
                30,
                "a request past the connection cap refused",
            )
            assert refused.status_code == 503
        finally:
            for sock in held:
                sock.close()
        wait_for(lambda: server.get("/healthz").status_code == 200, 30, "served again")


DEEP = b'{"api_key":"x","a":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
DEEP_ROUTES = [
    "/workflows/run",
    "/inference_pipelines/initialise",
    "/initialise_webrtc_worker",
    "/model/add",
    "/infer/object_detection",
]


@pytest.mark.parametrize("path", DEEP_ROUTES)
@pytest.mark.parametrize("keyed", [False, True], ids=["open", "keyed"])
def test_json_nested_past_the_parser_is_a_4xx_in_one_log_line(
    logged_server, keyed_server, path, keyed
):
    target = keyed_server if keyed else logged_server
    start = len(target.lines)
    response = httpx.post(target.url + path, content=DEEP, timeout=30,
                          headers={"Content-Type": "application/json"})  # fmt: skip
    assert 400 <= response.status_code < 500, response.text[:300]
    assert response.json()["message"]
    if keyed:
        assert response.status_code == 401
    target.wait_for_output(f'"POST {path} HTTP/1.1" {response.status_code}', start)
    logged = "\n".join(target.lines[start:])
    assert "Traceback" not in logged and "RecursionError" not in logged


LONG_ID = "m" * 5000


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/infer/object_detection", {"model_id": LONG_ID, "image": {"type": "url", "value": "x"}}),
        ("/model/add", {"model_id": LONG_ID}),
        ("/model/add", {"model_id": "../../etc"}),
    ],
)
def test_model_ids_are_checked_before_they_become_paths(server, path, body):
    response = server.post(path, json=body)
    assert response.status_code == 400, response.text
    assert "is not a model id" in response.json()["message"]
    assert len(response.text) < 1000  # the id is shown cut short


def _with_candidates(sdp: str, count: int) -> str:
    lines = sdp.rstrip("\r\n").split("\r\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("m=")) + 1
    extra = [f"a=candidate:1 1 udp 1 127.0.{n // 250}.{n % 250 + 1} 9 typ host"
             for n in range(count)]  # fmt: skip
    return "\r\n".join(lines[:at] + extra + lines[at:]) + "\r\n"


async def test_an_offer_of_thousands_of_candidates_is_refused_at_once(server):
    """20,000 candidates (under the body limit) held the loop for half a minute; the offer
    is now refused before any candidate is parsed, through sessions and WHIP alike."""
    sdp = _with_candidates(await data_channel_offer(), 20_000)
    assert len(sdp) < 1024 * 1024
    body = {
        "webrtc_offer": {"type": "offer", "sdp": sdp},
        "workflow_configuration": {
            "type": "WorkflowConfiguration",
            "workflow_specification": DETECT_SPEC,
        },
    }
    started = time.monotonic()
    session = server.post("/initialise_webrtc_worker", json=body)
    assert session.status_code == 400, session.text
    assert re.search(r"has 200\d\d ICE candidates; at most \d+ are", session.json()["message"])
    whip = server.post(
        "/whip/workflows/local/object-detection",
        content=sdp.replace("m=application", "m=video 9 UDP/TLS/RTP/SAVPF 96\r\nm=application"),
        headers={"Content-Type": "application/sdp"},
    )
    assert whip.status_code == 400, whip.text
    assert re.search(r"has 200\d\d ICE candidates", whip.json()["message"])
    assert time.monotonic() - started < 20  # a hang bound: each is refused in milliseconds


def test_what_the_server_stores_is_readable_by_its_user_only(tmp_path):
    """Events, pipeline requests and the directories they live in were 0644/0755."""
    data, sinks = tmp_path / "data", tmp_path / "sinks"
    for directory in (data, sinks):
        directory.mkdir(mode=0o755)
        directory.chmod(0o755)  # as an older version (or the umask) left them
    (data / "left-by-an-older-version.json").write_text("{}")
    with running_server(data_dir=str(data), sink_dir=str(sinks)) as server:
        camera = f"rtsp://127.0.0.1:{free_port()}/cam"  # nothing listens: reconnecting
        started = server.start_pipeline(camera, DETECT_SPEC)
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        stored = data / "pipelines" / f"{pipeline_id}.json"
        wait_for(stored.is_file, 30, "the pipeline's request stored")
        wait_for((data / "events.sqlite3").is_file, 30, "the event store")
        written = [p for p in (data, sinks, *data.rglob("*"), *sinks.rglob("*"))
                   if p.name != "left-by-an-older-version.json"]  # fmt: skip
        assert stored in written
        readable = {str(p): oct(p.stat().st_mode & 0o777) for p in written
                    if p.stat().st_mode & 0o077}  # fmt: skip
        assert readable == {}
        assert server.post(f"/inference_pipelines/{pipeline_id}/terminate").status_code == 200
