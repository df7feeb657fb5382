"""Notices: what a session tells its client in the ``errors`` of its result messages."""

from __future__ import annotations

from ..protocol.notices import Notice, NoticeCode

__all__ = ["MAX_PENDING_ERRORS", "Notices"]

# Errors waiting for the next result message, at most; the rest are counted in one entry.
MAX_PENDING_ERRORS = 16


class Notices:
    """Errors for the next result message, bounded whatever a peer makes us say; and why
    the source ended, said after the last frame."""

    def __init__(self) -> None:
        self._pending: list[Notice] = []
        self._suppressed = 0
        self._ending: list[Notice] = []
        self._dropped_reported = 0

    def report(self, code: NoticeCode, message: str) -> None:
        """For the next result message."""
        if len(self._pending) < MAX_PENDING_ERRORS:
            self._pending.append(Notice(code, message))
        else:
            self._suppressed += 1

    def report_at_end(self, notice: Notice) -> None:
        """For the message after the last frame (why the source ended)."""
        self._ending.append(notice)

    def for_frame(self, dropped: int | None = None, capacity: int = 0) -> list[Notice]:
        """This frame's errors; ``dropped``: frames a non-realtime input dropped so far,
        said once per new drop."""
        errors = self._drain()
        if dropped is not None and dropped > self._dropped_reported:
            errors.append(
                Notice(
                    NoticeCode.INPUT_DROPPED,
                    f"input queue full ({capacity} frames): dropped "
                    f"{dropped - self._dropped_reported} oldest frames",
                )
            )
            self._dropped_reported = dropped
        return errors

    def at_end(self) -> list[Notice]:
        """Everything not yet said, the source's ending last."""
        errors, self._ending = self._drain() + self._ending, []
        return errors

    def _drain(self) -> list[Notice]:
        errors, self._pending = self._pending, []
        if self._suppressed:
            message = f"{self._suppressed} more errors like these were not listed"
            errors.append(Notice(NoticeCode.ERRORS_SUPPRESSED, message))
            self._suppressed = 0
        return errors
