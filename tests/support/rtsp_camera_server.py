"""An RTSP camera for tests: GStreamer's gst-rtsp-server fed raw BGR frames on stdin.

Runs under Debian's ``/usr/bin/python3`` (``python3-gi``), not the project's interpreter:
    /usr/bin/python3 rtsp_camera_server.py PORT PATH WIDTH HEIGHT FPS
Frames (WIDTH*HEIGHT*3 bytes each, BGR) are read from stdin by a thread and pushed into every
attached client's appsrc, which H.264-encodes them with zero-latency settings. Prints
``READY rtsp://127.0.0.1:PORT/PATH`` once it listens, and ``CLIENT`` per connection. The
frames, stamped with their send time, come from the test process, so the stamp code lives in
one place.
"""

from __future__ import annotations

import sys
import threading

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main() -> None:
    port, path, width, height, fps = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    Gst.init(None)
    frame_bytes = width * height * 3
    sources: list[Gst.Element] = []
    lock = threading.Lock()

    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(
        f"( appsrc name=src is-live=true do-timestamp=true format=time "
        f"caps=video/x-raw,format=BGR,width={width},height={height},framerate={fps}/1 "
        f"! videoconvert ! video/x-raw,format=I420 "
        f"! x264enc tune=zerolatency speed-preset=ultrafast key-int-max={fps} bitrate=2000 "
        f"! rtph264pay name=pay0 pt=96 config-interval=1 )"
    )
    # One media (and encoder) per client. A shared media, set up by a client that connects
    # within a moment of the server's start, sometimes never sent it data (measured).
    factory.set_shared(False)

    def configured(_factory, media) -> None:
        source = media.get_element().get_child_by_name("src")
        with lock:
            sources.append(source)

        def unprepared(_media) -> None:  # the last client left: this appsrc is gone
            with lock:
                if source in sources:
                    sources.remove(source)

        media.connect("unprepared", unprepared)

    factory.connect("media-configure", configured)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    server.get_mount_points().add_factory(f"/{path}", factory)
    # One line per RTSP connection, so tests can count how many readers a camera has.
    server.connect("client-connected", lambda *_: print("CLIENT", flush=True))
    server.attach(None)

    def feed() -> None:
        stdin = sys.stdin.buffer
        while True:
            data = stdin.read(frame_bytes)
            if len(data) < frame_bytes:
                break
            with lock:
                targets = list(sources)
            for source in targets:
                # FLUSHING only means the media is not playing yet (a client is still setting
                # up): keep feeding it. The media's "unprepared" signal removes it for good.
                source.emit("push-buffer", Gst.Buffer.new_wrapped(data))
        loop.quit()

    loop = GLib.MainLoop()
    threading.Thread(target=feed, daemon=True).start()
    print(f"READY rtsp://127.0.0.1:{port}/{path}", flush=True)
    loop.run()


if __name__ == "__main__":
    main()
