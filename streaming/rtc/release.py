"""Hidden VP8 frames that let a frame-holding receiver show each returned frame at once.

aiortc's receiver (and so every inference-sdk program) knows a video frame is complete only
when a packet of the *next* frame arrives, so it shows each frame one frame interval late:
33 ms at 30 fps, 67 ms at 15 fps, and the last frame of a stream never. Our own receivers
release frames on the RTP marker bit (``rtc/jitter.py``), browsers do too, but a server
cannot change the receivers of the programs that call it. It can send them that next packet.

After each returned frame the outbound track hands aiortc's sender a hidden frame
(``HIDDEN_VP8_FRAME``) stamped one RTP tick later. Its packet completes the real frame in
the receiver's jitter buffer; the hidden frame itself is then the one held, and when it is
decoded it changes nothing and shows nothing:

- the frame tag (RFC 6386 §9.1) says inter frame, ``show_frame = 0``, first partition of
  size 0, and no data follows;
- a VP8 bool decoder reads zeros once its data ends (libvpx shifts in zeros by design), and
  a zero from the bool decoder reads as "no" for every header flag: no segmentation, no
  loop filter, no probability updates (and ``refresh_entropy_probs = 0``, so nothing
  persists), and ``refresh_last = 0`` with no golden or altref refresh. The macroblocks
  decode as flat intra blocks into a buffer nothing keeps: the decoder's reference frames
  and probabilities are exactly as before, and nothing is output.

It costs 3 bytes (one RTP packet) per frame and no encoding. libvpx decodes it so (aiortc,
Chrome, Firefox and Safari all use libvpx for VP8); ``tests/unit/test_release.py`` checks that
a stream decodes bit for bit the same with the hidden frames in it. FFmpeg's own VP8 decoder
rejects a frame this short, which is why it is sent only where it is needed (``auto``: to
peers whose offer aiortc made, unless the client says it is ours and releases frames itself)
and only when VP8 is the codec in use.
"""

from __future__ import annotations

import re

import av
from aiortc.mediastreams import VIDEO_TIME_BASE, convert_timebase
from aiortc.sdp import SessionDescription

__all__ = [
    "HIDDEN_VP8_FRAME",
    "OUR_USER_AGENT_PREFIX",
    "hidden_frame_after",
    "releases_frames",
]

# Frame tag, little-endian 24 bits: bit 0 = 1 (inter frame), bits 1-3 = version 0,
# bit 4 = show_frame 0, bits 5-23 = first partition size 0.
HIDDEN_VP8_FRAME = bytes([0x01, 0x00, 0x00])
OUR_USER_AGENT_PREFIX = "visionstream/"  # our client: its receiver releases frames itself

# aiortc writes its origin line as "- <ntp seconds> <the same number> IN IP4 0.0.0.0".
_AIORTC_ORIGIN = re.compile(r"^o=- (\d+) \1 IN IP4 0\.0\.0\.0\s*$", re.MULTILINE)


def hidden_frame_after(frame: av.VideoFrame) -> av.Packet | None:
    """The hidden frame to send right after ``frame``: one RTP tick later, so it is a frame
    of its own for the receiver and still before the next real one."""
    if frame.pts is None or frame.time_base is None:
        return None
    packet = av.Packet(HIDDEN_VP8_FRAME)
    # aiortc's own conversion, the one its encoder gives the real frame's RTP timestamp.
    packet.pts = convert_timebase(frame.pts, frame.time_base, VIDEO_TIME_BASE) + 1
    packet.time_base = VIDEO_TIME_BASE
    return packet


def releases_frames(mode: str, offer_sdp: str, answer_sdp: str, user_agent: str) -> bool:
    """Whether this session's returned frames are each followed by a hidden frame; ``mode``
    is ``Settings.release_frames``: auto, always or never."""
    if mode == "never" or _video_codec(answer_sdp) != "video/VP8":
        return False  # another codec would not carry a VP8 frame (H.264 has no hidden frames)
    if mode == "always":
        return True
    if user_agent.startswith(OUR_USER_AGENT_PREFIX):
        return False
    return _AIORTC_ORIGIN.search(offer_sdp) is not None


def _video_codec(sdp: str) -> str | None:
    """The codec our answer sends video with: the first one of its video section."""
    for media in SessionDescription.parse(sdp).media:
        if media.kind == "video" and media.rtp.codecs:
            return media.rtp.codecs[0].mimeType
    return None
