"""Publishes stamped synthetic frames over a network protocol FFmpeg speaks, for tests:

    python stream_publisher.py rtmp rtmp://127.0.0.1:PORT/live/cam WIDTH HEIGHT FPS
    python stream_publisher.py udp udp://127.0.0.1:PORT WIDTH HEIGHT FPS

``rtmp``: FLV published to an RTMP server (a test's nginx), as OBS or a camera would; PyAV
opens output URLs without options, so it cannot be the server itself. ``udp``: MPEG-TS
pushed to the address whether or not anyone listens. Prints ``SENDING`` once the output is
open. H.264, zero-latency; frames paced in real time and stamped (index and send time)
by ``sources.SyntheticSource``, so readers can measure latency from the pixels.
"""

from __future__ import annotations

import sys
from fractions import Fraction

import av

from sources import SyntheticSource

FORMATS: dict[str, tuple[str, dict[str, str]]] = {
    "rtmp": ("flv", {}),
    "udp": ("mpegts", {"flush_packets": "1"}),  # a datagram per frame, not per 32 KiB
    # 1 s segments (a GOP each), the last five listed, older ones deleted: a live playlist.
    "hls": ("hls", {"hls_time": "1", "hls_list_size": "5", "hls_flags": "delete_segments"}),
}


def _publish(container: av.container.OutputContainer, width: int, height: int, fps: int,
             source: SyntheticSource) -> None:  # fmt: skip
    stream = container.add_stream("libx264", rate=fps)
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    stream.options = {"preset": "ultrafast", "tune": "zerolatency", "g": str(fps)}
    stream.time_base = Fraction(1, fps)
    started: int | None = None
    for frame in source:
        started = frame.index if started is None else started
        video = av.VideoFrame.from_ndarray(frame.image, format="bgr24")
        video.pts, video.time_base = frame.index - started, Fraction(1, fps)
        for packet in stream.encode(video):
            container.mux(packet)


def main() -> None:
    kind, url = sys.argv[1], sys.argv[2]
    width, height, fps = (int(v) for v in sys.argv[3:6])
    source = SyntheticSource(width, height, fps=fps, realtime=True)
    form, options = FORMATS[kind]
    with av.open(url, mode="w", format=form, options=options) as container:
        print("SENDING", flush=True)
        _publish(container, width, height, fps, source)


if __name__ == "__main__":
    main()
