"""``visionstream`` from the shell as a new user meets it: help, ids as the server lists them,
mistakes answered in words (never a traceback), and a clean exit on Ctrl-C or SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import av
import numpy as np
import pytest

from tests.conftest import load_photo
from tests.support.media import stamped_clip, write_clip
from tests.support.server import LoggedProcess, ServerProcess, free_port

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "streaming.cli"]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def assert_no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr


def test_help_version_and_examples():
    top = cli("--help")
    assert top.returncode == 0 and "examples:" in top.stdout and "visionstream serve" in top.stdout
    bare = cli()
    assert bare.returncode == 0 and bare.stdout == top.stdout and not bare.stderr
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("visionstream ")
    stream = cli("stream", "--help").stdout
    options = [line.split()[0] for line in stream.splitlines() if line.startswith("  --")]
    assert len(options) >= 12
    assert "(default: VISIONSTREAM_API_URL, else http://127.0.0.1:9001)" in " ".join(stream.split())
    assert "(default: VISIONSTREAM_CONNECT_TIMEOUT_S, else 30)" in " ".join(stream.split())


@pytest.mark.parametrize(
    "workflow", ["local/object-detection", "object-detection", "local/image-blur"]
)
def test_workflow_ids_as_the_server_lists_them(server, workflow):
    # No scheme in --api-url: http:// is assumed.
    done = cli(
        "stream", "--source", "synthetic:320x240@30", "--frames", "5", "--no-realtime",
        "--workflow", workflow, "--api-url", server.url.removeprefix("http://"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "frames 5" in done.stderr
    assert_no_traceback(done)


def test_a_recording_has_every_returned_frame_and_the_latency_says_what_it_measures(
    server, tmp_path
):
    # The last frame comes back just after the server's completion message, on another path:
    # the client waits for it (it once ended early and recorded 149 frames of 150).
    record, jsonl = tmp_path / "out.mp4", tmp_path / "out.jsonl"
    done = cli(
        "stream", "--source", "synthetic:320x240@30", "--frames", "45", "--api-url", server.url,
        "--record", str(record), "--jsonl", str(jsonl), "--no-realtime",  # no frame dropped
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = len(jsonl.read_text().splitlines())
    with av.open(str(record)) as container:
        assert sum(1 for _ in container.decode(video=0)) == results == 45
    assert "end-to-end " in done.stderr  # the stamps are read back: the whole trip
    blurred = cli(
        "stream", "--source", "synthetic:320x240@30", "--frames", "10", "--api-url", server.url,
        "--workflow", "local/image-blur",
    )  # fmt: skip
    # A blurred frame's stamp cannot be read: only the server's part is known, and said so.
    assert blurred.returncode == 0 and "server processing " in blurred.stderr, blurred.stderr
    assert "end-to-end" not in blurred.stderr


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--workflow", "nope/missing"], 1, "workflow 'nope/missing' not found"),
        (["--workflow", "object-detektion"], 1, "a workflow of your own: --workflow FILE.json"),
        (["--api-url", "ftp://host"], 2, "--api-url must be the server's http(s) URL"),
        (["--source", "webcam:99"], 1, "cannot open camera 99"),
        (["--source", "/no/such/clip.mp4"], 2, "/no/such/clip.mp4"),
        (["--workflow", "missing.json"], 2, "cannot read workflow missing.json"),
        (["--source", "synthetic:64x48"], 2, "synthetic frames must be at least"),
    ],
)
def test_mistakes_are_said_in_words(server, args, code, needle):
    base = {"--source": "synthetic", "--api-url": server.url}
    merged = dict(base)
    merged.update(dict(zip(args[::2], args[1::2], strict=True)))
    done = cli("stream", *[part for pair in merged.items() for part in pair], "--frames", "3")
    assert done.returncode == code, done.stderr
    assert needle in done.stderr, done.stderr
    assert_no_traceback(done)
    assert "[ WARN" not in done.stderr  # OpenCV's own noise
    assert "frames 0" not in done.stderr  # no status line for a stream that never started


def test_a_missing_key_is_asked_for_as_this_command_takes_it(guarded_server):
    done = cli("stream", "--source", "synthetic", "--frames", "3",
               "--api-url", guarded_server.url)  # fmt: skip
    assert done.returncode == 1
    assert "requires an API key" in done.stderr, done.stderr
    assert "--api-key KEY, or VISIONSTREAM_API_KEY" in done.stderr
    assert_no_traceback(done)


def test_an_unreachable_server_says_how_to_start_one():
    url = f"http://127.0.0.1:{free_port()}"
    done = cli("stream", "--source", "synthetic", "--api-url", url)
    assert done.returncode == 1
    assert "cannot reach" in done.stderr and "visionstream serve" in done.stderr
    assert_no_traceback(done)


def test_a_server_going_away_mid_stream_is_a_failure():
    server = ServerProcess()
    try:
        server.wait_ready()
        command = [*CLI, "stream", "--source", "synthetic:320x240@15", "--api-url", server.url]
        client = LoggedProcess(command)
        try:
            server.wait_sessions_connected(1, timeout=60)
            server.process.send_signal(signal.SIGTERM)  # drains: the client is told why
            code = client.process.wait(60)
        finally:
            client.stop()
        output = "\n".join(client.lines)
        assert code == 1, output
        assert "server ended the stream: server_shutdown" in output
    finally:
        server.stop()


@pytest.fixture(scope="module")
def big_clip(tmp_path_factory):
    return stamped_clip(tmp_path_factory.mktemp("cli") / "big.mp4", frames=600)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_upload_ends_the_command_cleanly(tmp_path, big_clip, sig):
    uploads = tmp_path / "uploads"
    server = ServerProcess(upload_dir=str(uploads))
    try:
        server.wait_ready()
        client = LoggedProcess([*CLI, "stream", "--source", str(big_clip), "--api-url", server.url])
        try:
            server.wait_sessions_connected(1, timeout=60)
            client.process.send_signal(sig)
            code = client.process.wait(30)  # a hang bound; it takes well under a second
        finally:
            client.stop()
        output = "\n".join(client.lines)
        assert code == 130, output
        assert "Traceback" not in output
        server.wait_sessions_closed(1, timeout=60)
        assert [p for p in uploads.rglob("*") if p.is_file() and p.name != ".lock"] == []
    finally:
        server.stop()


def test_a_port_in_use_is_one_line_saying_how_to_pick_another(server):
    """Started twice on one port: no model load, no word about another server's data, no
    uvicorn "[Errno 98]": the port, and the option that picks another, at once."""
    port = server.url.rsplit(":", 1)[1]
    done = cli("serve", "--port", port, timeout=60)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"127.0.0.1:{port} is already in use" in lines[0]
    assert f"--port {int(port) + 1}" in lines[0] and "VISIONSTREAM_PORT" in lines[0]


def test_a_file_streamed_says_what_it_detected_and_the_figures_the_jsonl_has(
    server, photos, tmp_path
):
    dog = load_photo(photos, "dog.jpg")
    clip = write_clip(tmp_path / "dog.mp4", (np.roll(dog, 4 * i, axis=1) for i in range(20)))
    jsonl = tmp_path / "out.jsonl"
    done = cli("stream", "--source", str(clip), "--api-url", server.url, "--jsonl", str(jsonl))
    assert done.returncode == 0, done.stderr
    last = done.stderr.replace("\x1b[K", "").split("\r")[-1].strip()
    assert "dog" in last, last  # what it saw, not only how many frames
    line = json.loads(jsonl.read_text().splitlines()[-1])
    processing = line["processing_ms"]
    shown = f"{processing:.1f}" if processing < 10 else f"{processing:.0f}"
    assert f"server processing {shown} ms" in last, (last, processing)
