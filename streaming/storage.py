"""Who may read what the server stores: its own user only, unless a setting says otherwise.

Events (``events.sqlite3``), snapshots, clips, recordings and pipeline requests say where
cameras are and what they saw. The server's data and sink directories are made private when
it starts (so whatever an older version left readable inside is out of reach as well), and a
process that is the server (``visionstream serve``, a Ray replica, a pipeline actor) creates
its files without group or world bits (its umask). ``VISIONSTREAM_DATA_GROUP_READABLE`` lets the
owner's group read them (a backup agent, a review tool running as another user of the group).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .config import Settings

__all__ = ["private_directories", "private_process"]

log = logging.getLogger(__name__)


def _modes(settings: Settings) -> tuple[int, int]:
    """(directory mode, umask)."""
    return (0o750, 0o027) if settings.data_group_readable else (0o700, 0o077)


def private_process(settings: Settings) -> None:
    """This process is the server: files it creates from now on are its user's alone."""
    os.umask(_modes(settings)[1])


def private_directories(settings: Settings) -> None:
    """The data and sink directories, created if missing, readable by the server's user
    only; one the server does not own is left as it is, with a warning."""
    mode = _modes(settings)[0]
    for directory in (settings.data_dir, settings.sink_dir, settings.file_sink_dir):
        if directory is not None:
            _restrict(Path(directory), mode)


def _restrict(directory: Path, mode: int) -> None:
    try:
        directory.mkdir(mode=mode, parents=True, exist_ok=True)
        if directory.stat().st_uid != os.geteuid():
            log.warning("%s belongs to another user: its mode is left as it is", directory)
            return
        directory.chmod(mode)
    except OSError as exc:
        log.warning("cannot make %s private: %s", directory, exc)
