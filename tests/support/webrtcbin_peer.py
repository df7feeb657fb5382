"""A WHIP publisher or WHEP player built on GStreamer's webrtcbin: a WebRTC stack we did not
write (libnice for ICE, GStreamer's own DTLS/SRTP, RTP and codecs).

Runs under Debian's ``/usr/bin/python3`` (``python3-gi``, GStreamer's and libnice's typelibs),
not the project's interpreter; its ICE candidates are on 127.0.0.1:
    /usr/bin/python3 webrtcbin_peer.py publish|play URL vp8|h264 [TOKEN]
``publish`` sends a 320x240 15 fps test pattern, ``play`` receives and decodes video. The
offer is made with every ICE candidate (no trickle), POSTed as ``application/sdp`` with the
bearer token, and the answer applied. Prints ``LOCATION <url>`` (or ``REFUSED <status>
<body>``), ``STATE <connection state>`` on each change, ``FRAMES <n>`` for every 5th frame
decoded (play) or sent (publish), and exits on stdin closing after ``DELETE`` on its
location (``DELETED <status>``).
"""

from __future__ import annotations

import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
gi.require_version("Nice", "0.1")
from gi.repository import GLib, Gst, GstSdp, GstWebRTC, Nice  # noqa: E402

ENCODE = {
    "vp8": "vp8enc deadline=1 cpu-used=8 keyframe-max-dist=30 ! rtpvp8pay pt=96 "
    "! application/x-rtp,media=video,encoding-name=VP8,payload=96,clock-rate=90000",
    "h264": "x264enc tune=zerolatency speed-preset=ultrafast key-int-max=30 "
    "! video/x-h264,profile=constrained-baseline ! rtph264pay pt=102 config-interval=-1 "
    "! application/x-rtp,media=video,encoding-name=H264,payload=102,clock-rate=90000",
}
DECODE = {
    "vp8": "rtpvp8depay ! vp8dec",
    "h264": "rtph264depay ! h264parse ! openh264dec",
}
RECEIVE = {
    "vp8": "application/x-rtp,media=video,encoding-name=VP8,payload=96,clock-rate=90000",
    "h264": "application/x-rtp,media=video,encoding-name=H264,payload=102,clock-rate=90000,"
    "packetization-mode=(string)1,profile-level-id=(string)42e01f",
}


_SAYING = threading.Lock()


def say(line: str) -> None:
    """One whole line: frames are counted on GStreamer's streaming thread while the main
    loop says the rest, and two ``print`` calls at once interleaved ("DELETED 200FRAMES 5")."""
    with _SAYING:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Peer:
    def __init__(self, mode: str, url: str, codec: str, token: str | None) -> None:
        self.mode, self.url, self.token, self.codec = mode, url, token, codec
        self.location: str | None = None
        self.frames = 0
        if mode == "publish":
            self.pipe = Gst.parse_launch(
                "videotestsrc is-live=true pattern=ball "
                "! video/x-raw,width=320,height=240,framerate=15/1 ! videoconvert "
                f"! identity name=count ! queue ! {ENCODE[codec]} "
                "! webrtcbin name=rtc bundle-policy=max-bundle"
            )
            self.pipe.get_by_name("count").connect("handoff", self.on_frame)
        else:
            self.pipe = Gst.Pipeline.new("play")
            rtc = Gst.ElementFactory.make("webrtcbin", "rtc")
            rtc.set_property("bundle-policy", GstWebRTC.WebRTCBundlePolicy.MAX_BUNDLE)
            self.pipe.add(rtc)
        self.rtc = self.pipe.get_by_name("rtc")
        # libnice leaves loopback out of its host candidates; the tests' peers are all there.
        loopback = Nice.Address.new()
        loopback.set_from_string("127.0.0.1")
        # Both wrappers are kept: PyGObject drops a reference it never took when a property's
        # object wrapper goes (webrtcbin's ICE agent was freed under it).
        self.ice = self.rtc.get_property("ice-agent")
        self.agent = self.ice.get_property("agent")
        self.agent.add_local_address(loopback)
        if mode == "play":
            caps = Gst.Caps.from_string(RECEIVE[codec])
            direction = GstWebRTC.WebRTCRTPTransceiverDirection.RECVONLY
            self.rtc.emit("add-transceiver", direction, caps)
            self.rtc.connect("pad-added", self.on_pad)
        self.rtc.connect("on-negotiation-needed", self.on_negotiation_needed)
        self.rtc.connect("notify::ice-gathering-state", self.on_gathering)
        self.rtc.connect("notify::connection-state", self.on_connection_state)

    def on_frame(self, *_: object) -> None:
        self.frames += 1
        if self.frames % 5 == 0:
            say(f"FRAMES {self.frames}")

    def on_pad(self, _rtc: Gst.Element, pad: Gst.Pad) -> None:
        if pad.direction != Gst.PadDirection.SRC:
            return
        decode = Gst.parse_bin_from_description(
            f"queue ! {DECODE[self.codec]} ! videoconvert ! identity name=count "
            "! fakesink sync=false",
            True,
        )
        decode.get_by_name("count").connect("handoff", self.on_frame)
        self.pipe.add(decode)
        decode.sync_state_with_parent()
        if pad.link(decode.get_static_pad("sink")) != Gst.PadLinkReturn.OK:
            say("UNLINKED")

    def on_negotiation_needed(self, rtc: Gst.Element) -> None:
        promise = Gst.Promise.new_with_change_func(self.on_offer, rtc, None)
        rtc.emit("create-offer", None, promise)

    def on_offer(self, promise: Gst.Promise, rtc: Gst.Element, _: object) -> None:
        reply = promise.get_reply()
        offer = reply.get_value("offer") if reply is not None else None
        if offer is None:
            say(f"NO-OFFER {reply.to_string() if reply is not None else 'no reply'}")
            return
        rtc.emit("set-local-description", offer, Gst.Promise.new())

    def on_gathering(self, rtc: Gst.Element, _spec: object) -> None:
        if rtc.get_property("ice-gathering-state") != GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            return
        sdp = rtc.get_property("local-description").sdp.as_text()
        GLib.idle_add(self.post, sdp)

    def request(self, method: str, url: str, body: bytes | None = None) -> tuple[int, bytes, Any]:
        headers = {"Content-Type": "application/sdp"} if body is not None else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as response:
                return response.status, response.read(), response.headers
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), exc.headers

    def post(self, sdp: str) -> bool:
        status, body, headers = self.request("POST", self.url, sdp.encode())
        if os.environ.get("WEBRTCBIN_DEBUG"):
            say("OFFER " + sdp.replace("\r\n", " | "))
            say("ANSWER " + body.decode().replace("\r\n", " | "))
        if status != 201:
            say(f"REFUSED {status} {body.decode(errors='replace')}")
            return False
        self.location = urllib.parse.urljoin(self.url, headers.get("Location"))
        say(f"LOCATION {self.location}")
        _, message = GstSdp.SDPMessage.new_from_text(body.decode())
        answer = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.ANSWER, message)
        self.rtc.emit("set-remote-description", answer, Gst.Promise.new())
        return False

    def on_connection_state(self, rtc: Gst.Element, _spec: object) -> None:
        state = rtc.get_property("connection-state")
        say(f"STATE {state.value_nick}")

    def delete(self) -> None:
        if self.location is not None:
            status, _, _ = self.request("DELETE", self.location)
            say(f"DELETED {status}")


def main() -> None:
    mode, url, codec = sys.argv[1], sys.argv[2], sys.argv[3]
    token = sys.argv[4] if len(sys.argv) > 4 else None
    Gst.init(None)
    peer = Peer(mode, url, codec, token)
    loop = GLib.MainLoop()

    def until_stdin_closes() -> None:
        sys.stdin.read()
        GLib.idle_add(loop.quit)

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    peer.pipe.set_state(Gst.State.PLAYING)
    say("STARTED")
    loop.run()
    peer.delete()
    peer.pipe.set_state(Gst.State.NULL)


if __name__ == "__main__":
    main()
