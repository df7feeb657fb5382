#!/usr/bin/env bash
# Runs the whole suite. As root, inside a network namespace that has only loopback, so no
# test can send a packet anywhere but 127.0.0.1 (aiortc's default STUN lookups included).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
    exec unshare --net sh -c 'ip link set lo up && exec python3 -m pytest "$@"' sh "$@"
fi
echo "warning: not root or no unshare: running without the loopback-only namespace" >&2
exec python3 -m pytest "$@"
