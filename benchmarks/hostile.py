"""What the attacker's requests of issue 37 cost a server, before and after the hardening.

Each round starts a server (this checkout's, or the ``--before`` commit's in a worktree,
alternated) and measures:

- ``candidates_offer_s``: a session offer with 20,000 ``a=candidate`` lines (880 KB, under
  the 1 MiB body limit) from POST to answer, and its status;
- ``healthz_worst_ms``: the slowest ``/healthz`` answer while that offer is being handled
  (the event loop held: every other caller waits as long);
- ``deep_json_status``: a 400 KB body nested 200,000 deep to ``/infer/object_detection``;
- ``trickle_cut_s``: a body sent a byte every 0.5 s: seconds until the server answers (408),
  or ``null`` if it still waits after 30 s.

Results: ``results/<out>.json``.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks hostile --before REV'``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.ab import alternated, head
from benchmarks.common import write_result

_TRICKLE_LIMIT_S = 30.0


def _offer_with_candidates(count: int) -> str:
    from tests.support.peer import data_channel_offer

    lines = asyncio.run(data_channel_offer()).rstrip("\r\n").split("\r\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("m=")) + 1
    extra = [f"a=candidate:1 1 udp 1 127.0.{n // 250}.{n % 250 + 1} 9 typ host"
             for n in range(count)]  # fmt: skip
    return "\r\n".join(lines[:at] + extra + lines[at:]) + "\r\n"


def _candidates(url: str, sdp: str) -> dict[str, Any]:
    body = {
        "webrtc_offer": {"type": "offer", "sdp": sdp},
        "workflow_configuration": {"type": "WorkflowConfiguration",
                                   "workspace_name": "local", "workflow_id": "object-detection"},
    }  # fmt: skip
    worst, done = 0.0, threading.Event()

    def probe() -> None:
        nonlocal worst
        while not done.is_set():
            started = time.perf_counter()
            httpx.get(f"{url}/healthz", timeout=120)
            worst = max(worst, time.perf_counter() - started)
            done.wait(0.1)

    prober = threading.Thread(target=probe)
    started = time.perf_counter()
    prober.start()
    try:
        answer = httpx.post(f"{url}/initialise_webrtc_worker", json=body, timeout=300)
        took = time.perf_counter() - started
    finally:
        done.set()
        prober.join()
    return {"candidates_offer_s": round(took, 3), "candidates_offer_status": answer.status_code,
            "healthz_worst_ms": round(worst * 1000, 1)}  # fmt: skip


def _deep_json(url: str) -> int:
    deep = b'{"api_key":"x","a":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    headers = {"Content-Type": "application/json"}
    return httpx.post(f"{url}/infer/object_detection", content=deep, headers=headers,
                      timeout=60).status_code  # fmt: skip


def _trickle(port: int) -> float | None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /initialise_webrtc_worker HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 5000\r\n\r\n")  # fmt: skip
        started = time.monotonic()
        while time.monotonic() - started < _TRICKLE_LIMIT_S:
            sock.sendall(b" ")
            if select.select([sock], [], [], 0.5)[0]:  # answered: the body was cut off
                return round(time.monotonic() - started, 1)
    return None


def measure(server_root: Path) -> dict[str, Any]:
    from tests.support.server import running_server

    os.environ["VISIONSTREAM_BENCH_SERVER_ROOT"] = str(server_root)  # ServerProcess reads it
    sdp = _offer_with_candidates(20_000)
    # The deadline is left at its default (60 s): a short one is asked for so that the
    # trickle measure ends; the earlier server ignores the setting it does not have.
    with running_server(http_body_deadline_s="10") as server:
        return {**_candidates(server.url, sdp), "deep_json_status": _deep_json(server.url),
                "trickle_cut_s": _trickle(server.port)}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks hostile", description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the commit before the hardening")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="hostile")
    args = parser.parse_args(argv)
    rounds = alternated(args.before, args.rounds, measure)
    path = write_result(args.out, {
        "what": f"hostile requests, server at {args.before} (before) vs {head()} (after)",
        "rounds": rounds,
    })  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
