"""What a session tells its client besides results: the ``errors`` entries of result messages
and their stable codes (``video_metadata.error_codes``), one name for server and client."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Notice", "NoticeCode"]


class NoticeCode(StrEnum):
    """Every code a server of ours puts in ``error_codes``. A StrEnum: it equals its string,
    so programs may compare with either; codes from newer servers stay plain strings."""

    # The session's source
    SOURCE_ERROR = "source_error"
    """The camera or uploaded file failed; the message says why."""
    SOURCE_ENDED = "source_ended"
    """The watched pipeline source stopped (removed, its file ended, its publisher left, the
    pipeline terminated); the message says which, and the session ends."""
    FRAME_TOO_LARGE = "frame_too_large"
    """The client's frames exceed ``VISIONSTREAM_MAX_FRAME_PIXELS``; they are dropped."""
    INPUT_DROPPED = "input_dropped"
    """A non-realtime session's input queue was full: its oldest frames were dropped."""
    UPLOAD_IGNORED = "upload_ignored"
    """A ``video_upload`` channel came after the session already had a source."""
    UPLOAD_UNAVAILABLE = "upload_unavailable"
    """The server cannot store uploads right now."""
    UPLOAD_REFUSED = "upload_refused"
    """The upload broke the protocol or a limit (size); the message names it."""
    UPLOAD_INCOMPLETE = "upload_incomplete"
    """The upload channel closed before the file was complete."""
    UPLOAD_STALLED = "upload_stalled"
    """No upload chunk came for ``VISIONSTREAM_UPLOAD_IDLE_TIMEOUT_S``."""
    # The workflow and its outputs
    WORKFLOW_ERROR = "workflow_error"
    """The workflow failed on this frame; the session goes on."""
    NO_VISUALISATION = "no_visualisation"
    """The video output had no image on this frame: the frame went back as it came."""
    OUTPUT_NOT_FOUND = "output_not_found"
    """A data output asked for is not among this frame's outputs."""
    SERIALIZATION_ERROR = "serialization_error"
    """An output could not be turned into JSON."""
    # Control messages
    INVALID_CONTROL_MESSAGE = "invalid_control_message"
    """A message on the data channel was not a control message we understand."""
    OUTPUT_SWITCH_IGNORED = "output_switch_ignored"
    """A ``stream_output`` switch that cannot apply (no video track, unknown output)."""
    CONTROL_MESSAGE_FLOOD = "control_message_flood"
    """Too many control messages a second: the session is ended."""
    # The session itself
    INTERNAL_ERROR = "internal_error"
    """A bug of the server's: the session ends; the server's log says more."""
    ERRORS_SUPPRESSED = "errors_suppressed"
    """More errors came than one message lists; this entry counts the rest."""

    @classmethod
    def parse(cls, code: str) -> NoticeCode | str:
        """The member for a known code; a code this client does not know stays a string."""
        try:
            return cls(code)
        except ValueError:
            return code


@dataclass(frozen=True)
class Notice:
    """One entry of a result message's ``errors``: its text (the wire's ``errors``, for people
    and inference-sdk) and its stable ``code`` (``video_metadata.error_codes``, for programs)."""

    code: NoticeCode
    message: str
