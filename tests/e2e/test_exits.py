"""Programs that use our client always end: whichever way they leave a streaming session.

Each case runs ``tests/support/exit_program.py`` as its own process against the real server:
it raises, returns without closing, or is interrupted with Ctrl-C while frames flow, in every
mode of the client. The process must be gone soon after (the bound is a hang detector, far
above the ~1-2 s these take), say nothing about ignored exceptions, and the server must see
the session's goodbye, except where the program never closed an asyncio session: its loop's
end cancels aiortc's tasks with ours, so the server learns of it from ICE consent instead.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest

from tests.support.media import stamped_clip
from tests.support.server import LoggedProcess, running_server

pytestmark = pytest.mark.e2e

# From the moment the program ends (or gets Ctrl-C) to its exit. A hang is forever.
EXIT_BOUND_S = 20
# Starting a process that imports the client and connects, on a loaded 2-core machine.
START_BOUND_S = 90

CASES = [
    pytest.param(*case, id="-".join(case))
    for case in [
        *(
            (mode, ending, "manual")
            for mode in ("run", "video", "results", "callbacks", "astream", "thread")
            for ending in ("raise", "return", "sigint")
            if not (mode == "thread" and ending == "sigint")
        ),
        ("astream_with", "raise", "manual"),
        ("astream_with", "sigint", "manual"),
        ("video", "raise", "webcam"),
        ("run", "sigint", "webcam"),
        ("results", "return", "file"),
        ("results", "sigint", "file"),
    ]
]


@pytest.fixture(scope="module")
def server():
    """Its own: sessions these programs leave to ICE consent must not linger into others."""
    with running_server() as process:
        yield process


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return stamped_clip(tmp_path_factory.mktemp("exit") / "clip.mp4", frames=600, size=(320, 240))


@pytest.mark.parametrize(("mode", "ending", "source"), CASES)
def test_the_program_ends(server, clip, mode, ending, source):
    closed_before = server.closed_sessions
    server_mark = len(server.lines)
    command = [sys.executable, "-m", "tests.support.exit_program", server.url, mode, ending]
    program = LoggedProcess([*command, source, str(clip)])
    try:
        marker = "STREAMING" if ending == "sigint" else "ENDING"
        try:
            program.wait_for_output(marker, timeout=START_BOUND_S)
        except TimeoutError:
            # Where the session got to, from the server's side (it failed once under load
            # with a silent program: no frame or result ever reached it).
            pytest.fail(
                f"no {marker!r} from the program in {START_BOUND_S} s:\n"
                + "\n".join(program.output)
                + "\nthe server meanwhile:\n"
                + "\n".join(server.lines[server_mark:])
            )
        if ending == "sigint":
            program.process.send_signal(signal.SIGINT)
        try:
            code = program.process.wait(EXIT_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"still running {EXIT_BOUND_S} s after it ended:\n"
                + "\n".join(program.output)
                + "\nthreads: "
                + str(threading.enumerate())
            )
    finally:
        program.stop()
    output = "\n".join(program.output)
    assert "Exception ignored" not in output, output
    if ending == "raise":
        assert code == 1 and "the program failed while streaming" in output, output
    elif ending == "return":
        assert code == 0, output
    else:
        assert code in (1, 130, -signal.SIGINT), output
    if mode != "astream":
        server.wait_sessions_closed(closed_before + 1, timeout=60)
