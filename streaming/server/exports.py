"""A range of a recording as one MP4 response: made in a temporary file on a thread,
served with range requests, removed once sent."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from sinks.recording.export import export
from sinks.recording.segments import NoRecording

from ..errors import NotFound

__all__ = ["export_file"]


async def export_file(directory: Path, start: float, end: float, name: str) -> FileResponse:
    """``[start, end]`` of the recording in ``directory`` as a response; 404 when nothing
    was recorded then. The file is removed once sent."""
    handle, path = tempfile.mkstemp(prefix="visionstream-export-", suffix=".mp4")
    os.close(handle)
    output = Path(path)
    try:
        exported = await asyncio.to_thread(export, directory, start, end, output)
    except NoRecording as exc:
        output.unlink(missing_ok=True)
        raise NotFound(str(exc)) from None
    except BaseException:
        output.unlink(missing_ok=True)
        raise
    headers = {
        "X-Recording-Start": f"{exported.start:.3f}",
        "X-Recording-End": f"{exported.end:.3f}",
    }
    if exported.truncated:
        headers["X-Recording-Truncated"] = "the camera changed its picture size"
    return FileResponse(
        output,
        media_type="video/mp4",
        filename=f"{name}-{round(exported.start)}.mp4",
        headers=headers,
        background=BackgroundTask(output.unlink, missing_ok=True),
    )
