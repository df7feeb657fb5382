"""A directory's disk quota: what writers under it may keep in all, and the free space they
leave on its disk. One ``DiskQuota`` per directory in a process (``quota_for``), so every
writer under it charges the same total; the total starts from what the directory already
holds (one walk, the first time) and grows with each write admitted."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

__all__ = ["DiskQuota", "QuotaExceeded", "quota_for"]


class QuotaExceeded(OSError):
    """A write would pass the directory's quota or its disk's free-space floor."""


class DiskQuota:
    def __init__(self, root: Path, max_bytes: int, min_free_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.min_free_bytes = min_free_bytes
        self._lock = threading.Lock()
        self._used: int | None = None

    def used(self) -> int:
        """Bytes the directory holds (walked once; then kept by ``admit``)."""
        with self._lock:
            return self._walked()

    def _walked(self) -> int:
        if self._used is None:
            total = 0
            for folder, _, names in os.walk(self.root):
                for name in names:
                    try:
                        total += os.stat(os.path.join(folder, name), follow_symlinks=False).st_size
                    except OSError:
                        continue  # removed while walking
            self._used = total
        return self._used

    def admit(self, size: int) -> None:
        """Counts ``size`` more bytes, or raises ``QuotaExceeded`` saying which bound."""
        with self._lock:
            used = self._walked()
            if used + size > self.max_bytes:
                raise QuotaExceeded(
                    f"the directory holds {used} bytes; {size} more would pass its quota of "
                    f"{self.max_bytes}"
                )
            free = shutil.disk_usage(self.root).free
            if free - size < self.min_free_bytes:
                raise QuotaExceeded(
                    f"the directory's disk has {free} bytes free and keeps at least "
                    f"{self.min_free_bytes}"
                )
            self._used = used + size


_QUOTAS: dict[Path, DiskQuota] = {}
_QUOTAS_LOCK = threading.Lock()


def quota_for(root: Path, max_bytes: int, min_free_bytes: int) -> DiskQuota:
    """The process's quota of ``root`` (created, or its bounds updated to these)."""
    root = root.resolve()
    with _QUOTAS_LOCK:
        quota = _QUOTAS.get(root)
        if quota is None:
            root.mkdir(parents=True, exist_ok=True)
            quota = _QUOTAS[root] = DiskQuota(root, max_bytes, min_free_bytes)
        quota.max_bytes, quota.min_free_bytes = max_bytes, min_free_bytes
        return quota
