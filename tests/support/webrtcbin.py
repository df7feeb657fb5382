"""GStreamer's webrtcbin as a WHIP publisher or WHEP player (``webrtcbin_peer.py``, run
under Debian's Python), driven from the tests: wait for its lines, end it with a goodbye
(``DELETE``) or kill it without one."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from tests.support.camera import SYSTEM_PYTHON
from tests.support.server import LoggedProcess

PEER = Path(__file__).with_name("webrtcbin_peer.py")
# GStreamer starting, ICE, DTLS and a first keyframe, on a loaded 2-core machine.
CONNECT_S = 60


class WebrtcbinPeer(LoggedProcess):
    """``mode``: ``publish`` or ``play``; ``codec``: ``vp8`` or ``h264``."""

    def __init__(self, mode: str, url: str, codec: str, token: str | None = None) -> None:
        command = [SYSTEM_PYTHON, str(PEER), mode, url, codec, *([token] if token else [])]
        super().__init__(command, stdin=subprocess.PIPE)

    def location(self) -> str:
        """The resource's URL, once the server answered (AssertionError if it refused)."""
        index = self.wait_for_any(("LOCATION ", "REFUSED "))
        line = self.lines[index]
        assert line.startswith("LOCATION "), line
        return line.removeprefix("LOCATION ")

    def refusal(self) -> tuple[int, str]:
        """The server's status and body, when it refused the offer."""
        line = self.lines[self.wait_for_output("REFUSED ", timeout=CONNECT_S)]
        _, status, body = line.split(" ", 2)
        return int(status), body

    def wait_for_any(self, texts: tuple[str, ...]) -> int:
        pattern = "|".join(re.escape(t) for t in texts)
        with self._lines:
            self._lines.wait_for(
                lambda: any(re.match(pattern, line) for line in self.lines), CONNECT_S
            )
        for i, line in enumerate(self.lines):
            if re.match(pattern, line):
                return i
        raise TimeoutError(f"none of {texts} in {CONNECT_S} s:\n" + "\n".join(self.output))

    def wait_connected(self) -> None:
        self.wait_for_output("STATE connected", timeout=CONNECT_S)

    def wait_frames(self, count: int) -> None:
        """Until ``count`` frames were decoded (play) or sent (publish), by fives."""
        self.wait_for_output(f"FRAMES {count - count % 5 or 5}", timeout=CONNECT_S)

    def frames(self) -> int:
        counts = [int(line.split()[1]) for line in list(self.lines) if line.startswith("FRAMES ")]
        return max(counts, default=0)

    def end(self) -> int:
        """Stdin closed: the peer sends ``DELETE`` and exits; returns DELETE's status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        index = self.wait_for_output("DELETED ", timeout=CONNECT_S)
        self.process.wait(CONNECT_S)
        return int(self.lines[index].split()[1])

    def vanish(self) -> None:
        """Killed: no DELETE, no DTLS close, nothing."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(CONNECT_S)
