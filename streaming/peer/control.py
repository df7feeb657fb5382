"""ControlChannel: a session's control messages (ACKs, output switching) and their limit."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..feed import Spawn
from ..metrics import Metrics
from ..protocol.messages import parse_control_message
from ..protocol.notices import Notice, NoticeCode
from .ack import AckGate
from .notices import Notices
from .processor import FrameProcessor, OutputSelection

__all__ = ["CONTROL_BURST", "CONTROL_RATE", "ControlChannel"]

log = logging.getLogger(__name__)

# Control messages: a burst of this many, then this many a second (ACKs come at the frame
# rate). Beyond that a peer is flooding, and the session ends.
CONTROL_BURST = 500
CONTROL_RATE = 200.0


class ControlChannel:
    """Applies each message from the client's data channel: an ACK opens the gate, an output
    switch swaps the processor's selection (atomically: the processor reads it once per
    frame); what cannot be applied becomes a notice. A flood calls ``on_flood`` once."""

    def __init__(
        self,
        session: str,
        processor: FrameProcessor,
        acks: AckGate,
        notices: Notices,
        metrics: Metrics,
        spawn: Spawn,
        on_flood: Callable[[], None],
    ) -> None:
        self._session = session
        self._processor = processor
        self._acks = acks
        self._notices = notices
        self._metrics = metrics
        self._spawn = spawn
        self._on_flood = on_flood
        self._budget = float(CONTROL_BURST)
        self._refilled = time.monotonic()
        self.video_out = False
        """Whether the session has a video track to switch (set once it is known)."""
        self.ended = False
        """Set when the session is ending: later messages are ignored."""

    def on_message(self, message: str | bytes) -> None:
        if self.ended:
            return
        if not self._within_budget():
            log.info("session %s: control messages flooded; ending it", self._session)
            self._notices.report_at_end(
                Notice(
                    NoticeCode.CONTROL_MESSAGE_FLOOD,
                    f"more than {CONTROL_RATE:g} control messages a second: the session is ended",
                )
            )
            self.ended = True  # once: later ones are ignored
            self._on_flood()
            return
        try:
            control = parse_control_message(message)
        except ValueError as exc:
            log.debug("session %s: %s", self._session, exc)
            self._notices.report(NoticeCode.INVALID_CONTROL_MESSAGE, str(exc))
            return
        if control.ack is not None:
            self._metrics.acks_received.inc()
            self._spawn(self._acks.ack(control.ack))
        if control.stream_output is not None:
            self._switch_stream_output(control.stream_output)
        if control.data_output is not None:
            mode, names = OutputSelection.parse_data_output(control.data_output)
            current = self._processor.selection
            self._processor.selection = OutputSelection(current.stream_output, mode, names)

    def _within_budget(self) -> bool:
        # A token bucket: CONTROL_BURST at once, refilled at CONTROL_RATE a second.
        now = time.monotonic()
        self._budget = min(CONTROL_BURST, self._budget + (now - self._refilled) * CONTROL_RATE)
        self._refilled = now
        self._budget -= 1
        return self._budget >= 0

    def _switch_stream_output(self, requested: list[str | None]) -> None:
        if not self.video_out:
            self._notices.report(
                NoticeCode.OUTPUT_SWITCH_IGNORED,
                "stream_output ignored: this session has no video track",
            )
            return
        names = [n for n in requested if n]
        if names and names[0] not in self._processor.outputs.output_names:
            self._notices.report(
                NoticeCode.OUTPUT_SWITCH_IGNORED,
                f"stream_output '{names[0]}' ignored: not an output of the workflow",
            )
            return
        current = self._processor.selection
        # [] keeps the track alive but renders raw frames, as the reference does.
        stream = names[0] if names else ""
        self._processor.selection = OutputSelection(stream, current.data_mode, current.data_names)
