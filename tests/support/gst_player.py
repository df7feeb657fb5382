"""A player we did not write: GStreamer's ``playbin`` (``rtspsrc`` for RTSP, ``hlsdemux``
for HLS, ``multipartdemux`` and ``jpegdec`` for MJPEG), decoding into an appsink.

Runs under Debian's ``/usr/bin/python3`` (``python3-gi``), not the project's interpreter:
    /usr/bin/python3 gst_player.py URI SECONDS OUT
Plays ``URI`` until ``SECONDS`` after its first decoded frame, writes the last frame's BGR
bytes to ``OUT`` and prints one JSON line: the frames' size, how many came, and the span of
their timestamps and of their arrival (seconds).
"""

from __future__ import annotations

import json
import sys
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402


def main() -> None:
    uri, seconds, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    Gst.init(None)
    player = Gst.ElementFactory.make("playbin", "player")
    sink = Gst.parse_bin_from_description(
        "videoconvert ! video/x-raw,format=BGR ! appsink name=sink sync=false max-buffers=1",
        True,
    )
    player.set_property("uri", uri)
    player.set_property("video-sink", sink)
    player.set_property("audio-sink", Gst.ElementFactory.make("fakesink", None))
    appsink = sink.get_by_name("sink")
    # MJPEG: multipartdemux waits for every part's type before it says it has all its
    # pads, and decodebin waits for that: tell it the stream is one stream of JPEGs.
    player.connect("deep-element-added", _one_stream)
    player.set_state(Gst.State.PLAYING)
    bus = player.get_bus()
    report = {"frames": 0, "width": 0, "height": 0, "pts_span": 0.0, "arrival_span": 0.0}
    first_pts = first_at = None
    deadline = time.monotonic() + seconds + 60  # the first frame may take a while
    try:
        while time.monotonic() < deadline:
            message = bus.pop_filtered(Gst.MessageType.ERROR | Gst.MessageType.EOS)
            if message is not None:
                if message.type == Gst.MessageType.ERROR:
                    report["error"] = str(message.parse_error()[0])
                break
            sample = appsink.emit("try-pull-sample", Gst.SECOND // 10)
            if sample is None:
                continue
            buffer = sample.get_buffer()
            structure = sample.get_caps().get_structure(0)
            now = time.monotonic()
            if first_at is None:
                first_pts, first_at = buffer.pts, now
                deadline = now + seconds
            report["frames"] += 1
            report["width"] = structure.get_value("width")
            report["height"] = structure.get_value("height")
            report["pts_span"] = (buffer.pts - first_pts) / Gst.SECOND
            report["arrival_span"] = now - first_at
            ok, mapped = buffer.map(Gst.MapFlags.READ)
            if ok:
                with open(out, "wb") as file:
                    file.write(bytes(mapped.data))
                buffer.unmap(mapped)
    finally:
        player.set_state(Gst.State.NULL)
    print(json.dumps(report), flush=True)


def _one_stream(_bin, _sub_bin, element) -> None:
    factory = element.get_factory()
    if factory is not None and factory.get_name() == "multipartdemux":
        element.set_property("single-stream", True)


if __name__ == "__main__":
    main()
