"""UploadDirectory: where this server writes uploaded videos while their sessions live.

Private to this server process: a ``server-<pid>`` directory (mode 0700) under the
configured base (``VISIONSTREAM_UPLOAD_DIR``, default ``<tmp>/visionstream-uploads-<uid>``),
holding an exclusive ``flock`` for the server's lifetime. Sessions delete their own files
however they end; a server killed with SIGKILL cannot, so at start every sibling directory
whose lock is free (its server is gone: the kernel released the lock) is swept away.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["UploadDirectory"]

log = logging.getLogger(__name__)

_LOCK = ".lock"
_PREFIX = "server-"


def default_base() -> Path:
    return Path(tempfile.gettempdir()) / f"visionstream-uploads-{os.getuid()}"


class UploadDirectory:
    """This server's private upload directory (``server-<pid>``, mode 0700), locked while it
    runs; directories of servers that died are swept at start."""

    def __init__(self, base: Path | None = None) -> None:
        self.base = base or default_base()
        self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._sweep()
        self.path = self.base / f"{_PREFIX}{os.getpid()}"
        self.path.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.path, 0o700)  # mkdir's mode is masked by the umask
        self._lock = os.open(self.path / _LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _sweep(self) -> None:
        """Removes the directories of servers that are gone (logging how many files went)."""
        removed = 0
        for directory in self.base.glob(f"{_PREFIX}*"):
            if not directory.is_dir() or not _abandoned(directory):
                continue
            leftovers = [p for p in directory.iterdir() if p.name != _LOCK]
            shutil.rmtree(directory, ignore_errors=True)
            removed += len(leftovers)
        if removed:
            log.info("removed %d uploads left behind by a server that was killed", removed)

    def close(self) -> None:
        """Idempotent: deletes whatever is still here, and the directory."""
        if self._lock < 0:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._lock)
        self._lock = -1


def _abandoned(directory: Path) -> bool:
    try:
        fd = os.open(directory / _LOCK, os.O_RDWR)
    except FileNotFoundError:
        return True  # never locked, or half removed
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # a live server holds it
    finally:
        os.close(fd)
    return True
