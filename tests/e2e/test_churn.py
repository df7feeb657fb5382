"""A short churn soak (the benchmark runs 1,000): sessions of every kind opened and ended,
WHIP publishers and WHEP players (GStreamer's webrtcbin) among them, some clients killed
without a goodbye, some aborted mid-handshake; afterwards the server's threads, file
descriptors, open peer connections, WHIP publishers, upload files and sessions are back at
their baseline."""

from __future__ import annotations

import pytest

from tests.support.churn import KINDS, Churn, Resources, plan
from tests.support.media import stamped_clip
from tests.support.server import ServerProcess

pytestmark = pytest.mark.e2e

SESSIONS = 50


def test_fifty_sessions_of_every_kind_leave_nothing_behind(tmp_path, camera):
    uploads = tmp_path / "uploads"
    clip = stamped_clip(tmp_path / "clip.mp4", frames=8, size=(320, 240))
    server = ServerProcess(
        upload_dir=str(uploads),
        connect_timeout_s="3",
        max_sessions="32",
        max_sessions_per_address="32",
        whip_idle_timeout_s="2",
    )
    try:
        server.wait_ready()
        churn = Churn(server, camera.url, clip)
        churn.run(list(KINDS))  # warm-up: threads and buffers every kind needs
        churn.wait_all_closed(timeout=120)
        baseline = Resources.of(server, uploads)
        assert baseline.sessions == 0 and baseline.upload_files == 0

        churn.run(plan(SESSIONS))
        churn.wait_all_closed(timeout=120)  # the vanished ones: ICE consent, ~30 s
        after = Resources.of(server, uploads)
    finally:
        server.stop()
    assert after.back_to(baseline), (baseline, after)
    print(f"\nchurn: {SESSIONS} sessions, RSS {baseline.rss_mb:.0f} -> {after.rss_mb:.0f} MB")
