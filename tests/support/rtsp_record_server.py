"""A push target for tests: GStreamer's gst-rtsp-server in RECORD mode (what MediaMTX and
go2rtc are to a pushing camera), decoding what it is sent.

Runs under Debian's ``/usr/bin/python3`` (``python3-gi``), not the project's interpreter:
    /usr/bin/python3 rtsp_record_server.py PORT PATH OUT
Prints ``READY`` once it listens, then ``FRAME <count> <width> <height> <seconds>`` for every
decoded frame (seconds: its timestamp), and writes each frame's BGR bytes to ``OUT``.
"""

from __future__ import annotations

import os
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main() -> None:
    port, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    Gst.init(None)
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_transport_mode(GstRtspServer.RTSPTransportMode.RECORD)
    factory.set_launch(
        "( decodebin name=depay0 ! videoconvert ! video/x-raw,format=BGR "
        "! appsink name=sink emit-signals=true sync=false )"
    )
    count = [0]

    def sample(sink) -> Gst.FlowReturn:
        taken = sink.emit("pull-sample")
        buffer = taken.get_buffer()
        structure = taken.get_caps().get_structure(0)
        ok, mapped = buffer.map(Gst.MapFlags.READ)
        if ok:
            with open(out + ".part", "wb") as file:
                file.write(bytes(mapped.data))
            buffer.unmap(mapped)
            os.replace(out + ".part", out)
        count[0] += 1
        width, height = structure.get_value("width"), structure.get_value("height")
        print(f"FRAME {count[0]} {width} {height} {buffer.pts / Gst.SECOND:.4f}", flush=True)
        return Gst.FlowReturn.OK

    def configured(_factory, media) -> None:
        media.get_element().get_by_name("sink").connect("new-sample", sample)

    factory.connect("media-configure", configured)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    server.get_mount_points().add_factory(f"/{path}", factory)
    server.attach(None)
    print("READY", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
