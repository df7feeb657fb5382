"""``visionstream stream``'s status line shows a line counter's counts when results carry them."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from streaming.client.command import _Progress
from streaming.protocol.messages import VideoMetadata


def test_counts_join_the_status_line_once_a_result_has_them():
    progress = _Progress(None, io.StringIO())
    metadata = VideoMetadata(frame_id=1, received_at=datetime.now(UTC))
    progress.result(metadata, {"predictions": {}})
    assert " in " not in progress.line()
    progress.result(metadata, {"count_in": 3, "count_out": 1})
    assert progress.line().endswith("in 3 out 1")
