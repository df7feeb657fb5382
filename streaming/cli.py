"""``visionstream serve | stream | bench | models pull | list | add``.

Only the standard library is imported here: ``--help`` and argument errors answer at once,
and each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import errno
import gc
import logging
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .keys_cli import add_keys_commands
from .models_cli import add_models_commands

if TYPE_CHECKING:
    from .config import Settings

__all__ = ["main"]

_EXAMPLES = """examples:
  visionstream serve                                   the server and its page on :9001
  visionstream serve --ray                             the same, as Ray Serve replicas on every core
  visionstream stream --source webcam                  your camera, annotated, in the terminal
  visionstream stream --source clip.mp4 --jsonl out.jsonl --record out.mp4
  visionstream stream --source rtsp://cam.local/live --workflow local/object-detection --display
  visionstream models list                             models ready to serve
"""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each option's default after its help (unless it says its own, or has none that
    means anything); the examples kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default in (None, False, argparse.SUPPRESS)
            or not action.option_strings
        ):
            return text
        shown = " ".join(default) if isinstance(default, list) else default
        return f"{text} (default: {shown})"


def _settings(**overrides: Any) -> Settings:
    from .config import Settings

    return Settings(**overrides)


_LOCAL_RAY = "local"


def _serve_settings(args: argparse.Namespace) -> Settings:
    """The environment's settings, with ``--host`` / ``--port`` where given."""
    from .config import environment_notes

    for line in environment_notes():
        print(f"warning: {line}", file=sys.stderr, flush=True)
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    return _settings(**overrides)


def _serve(args: argparse.Namespace) -> int:
    if args.ray is not None:
        return _serve_on_ray(args)
    settings = _serve_settings(args)
    # Bound before anything is imported or started: a port already taken is one line and
    # an exit, not a model load, a data directory's warning and uvicorn's "[Errno 98]".
    listening = _listening_socket(settings.host, settings.port)
    if listening is None:
        return 1
    import uvicorn

    from .server import create_app
    from .server.connections import BodyTimeout, DirectPeer, guarded_protocol
    from .server.shutdown import DrainingServer
    from .storage import private_process

    private_process(settings)
    app = create_app(settings)
    config = uvicorn.Config(
        # Outermost: its 408 replaces whatever the app makes of a stalled body.
        BodyTimeout(
            DirectPeer(app, settings.trusted_proxies),
            settings.http_body_timeout_s,
            settings.http_body_deadline_s,
        ),
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        access_log=settings.access_log,
        http=guarded_protocol(settings.http_header_timeout_s),
        limit_concurrency=settings.max_connections,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 by default: a local client could
        # then pick the address its throttle and session cap count against. DirectPeer
        # believes it from VISIONSTREAM_TRUSTED_PROXIES alone, keeping the connection's own.
        proxy_headers=False,
    )
    if args.log_level == "info":
        # uvicorn's start and stop lines ("Started server process", "Waiting for application
        # startup", ...) say less than our one "ready:" line, which comes once the socket is
        # bound too; its warnings and errors stay. --log-level debug shows everything.
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    # SIGTERM or Ctrl-C drains the sessions first (server/shutdown.py); a second one hurries.
    DrainingServer(config, app).run(sockets=[listening])
    # Everything is closed: the interpreter's last collections over the heap of loaded
    # libraries took 0.6 s of every Ctrl-C. Frozen, they skip it (atexit still runs).
    gc.freeze()
    return 0


def _listening_socket(host: str, port: int) -> socket.socket | None:
    """The server's socket, bound as uvicorn binds it; None, said why on stderr, when it
    cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        where = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            why = (
                f"{where} is already in use (another visionstream server, or another "
                f"program): stop it, or start this one on another port: "
                f"visionstream serve --port {port + 1 if port else 9002} (or VISIONSTREAM_PORT)"
            )
        elif exc.errno == errno.EADDRNOTAVAIL:
            why = f"{host} is not an address of this machine: --host 127.0.0.1, or 0.0.0.0 for all"
        elif exc.errno == errno.EACCES:
            why = f"port {port} needs privileges: a port above 1023 (--port 9001)"
        else:
            why = f"cannot listen on {where}: {exc.strerror or exc}"
        print(f"error: {why}", file=sys.stderr, flush=True)
        return None
    sock.set_inheritable(True)
    return sock


def _deploy_kuberay(args: argparse.Namespace) -> int:
    from .cluster.kuberay import manifest

    print(
        manifest(
            args.image,
            args.workers,
            str(args.replicas),
            args.max_replicas,
            args.gpu_share,
            args.port,
        ),
        end="",
    )
    return 0


def _replicas(value: str) -> int | str:
    if value == "auto":
        return value
    count = int(value)  # argparse reports a ValueError as an invalid value
    if count < 1:
        raise argparse.ArgumentTypeError("at least 1, or auto")
    return count


def _serve_on_ray(args: argparse.Namespace) -> int:
    try:
        from .cluster.run import serve_on_ray
    except ImportError as exc:
        print(
            f"--ray needs the ray extra: pip install 'visionstream[ray]' ({exc})", file=sys.stderr
        )
        return 2
    address = None if args.ray == _LOCAL_RAY else args.ray
    serve_on_ray(_serve_settings(args), address, args.replicas)
    return 0


def _bench(args: argparse.Namespace) -> int:
    """The harness lives in the source checkout's benchmarks/ (it drives the real server)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    if not (root / "benchmarks" / "__main__.py").is_file():
        print(
            "visionstream bench runs from a source checkout (benchmarks/ is not installed)",
            file=sys.stderr,
        )
        return 2
    command = [sys.executable, "-m", "benchmarks", *args.bench_args]
    return subprocess.run(command, cwd=root, check=False).returncode


def _stream(args: argparse.Namespace) -> int:
    from .client.command import run

    return run(args)


def _add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        required=True,
        help="webcam[:N] | PATH (a video file, uploaded) | rtsp://... | http(s)://... (MJPEG) "
        "| synthetic[:WxH@FPS] (a stamped test pattern)",
    )
    parser.add_argument(
        "--workflow",
        help="a workflow id as GET /workflows lists it (WORKSPACE/ID, or ID in the 'local' "
        "workspace), or a specification JSON file (default: built-in object detection)",
    )
    parser.add_argument("--workspace", help="workspace of a workflow id given without one")
    parser.add_argument(
        "--api-url",
        help="the server; http:// is assumed when no scheme is given "
        "(default: VISIONSTREAM_API_URL, else http://127.0.0.1:9001)",
    )
    parser.add_argument("--api-key", help="the server's API key (or set VISIONSTREAM_API_KEY)")
    parser.add_argument("--display", action="store_true", help="show frames in a window")
    parser.add_argument("--record", type=Path, metavar="OUT.mp4", help="record returned frames")
    parser.add_argument("--jsonl", type=Path, metavar="OUT.jsonl", help="one line per result")
    parser.add_argument(
        "--realtime",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="drop frames to keep up (default: on for live sources, off for files)",
    )
    parser.add_argument(
        "--stream-output", help="workflow output to render (default: the server picks)"
    )
    parser.add_argument(
        "--data-output", nargs="*", default=["*"], help="workflow outputs to receive ('*': all)"
    )
    parser.add_argument("--frames", type=int, help="synthetic: how many frames (default endless)")
    parser.add_argument(
        "--connect-timeout",
        type=float,
        help="seconds to set up the session (default: VISIONSTREAM_CONNECT_TIMEOUT_S, else 30)",
    )
    parser.add_argument(
        "--turn", metavar="URL", help="a TURN server both peers use: turn:host:3478[?transport=tcp]"
    )
    parser.add_argument("--turn-user", help="its user name")
    parser.add_argument(
        "--turn-password", help="its password (or set VISIONSTREAM_TURN_PASSWORD; never logged)"
    )
    parser.add_argument(
        "--relay-only", action="store_true", help="use only the TURN relay (no host addresses)"
    )
    parser.add_argument(
        "--video-codec", choices=["vp8", "h264"], help="the codec to prefer (default: VP8 first)"
    )


Command = Callable[..., argparse.ArgumentParser]
"""Adds a command (name, help) to the parser."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="visionstream",
        description="Real-time video inference over WebRTC: the server, and a client for it.",
        epilog=_EXAMPLES,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
        return commands.add_parser(
            name, help=help, description=help, formatter_class=_HelpFormatter, **kwargs
        )

    serve = command("serve", "run the server (settings: VISIONSTREAM_* environment variables)")
    serve.add_argument("--host", help="bind address (default 127.0.0.1, VISIONSTREAM_HOST)")
    serve.add_argument("--port", type=int, help="port (default 9001, VISIONSTREAM_PORT)")
    serve.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    serve.add_argument(
        "--ray",
        nargs="?",
        const=_LOCAL_RAY,
        metavar="ADDRESS",
        help="run as Ray Serve replicas (the ray extra): alone, a local Ray on every core; "
        "with auto or ray://host:10001, on that cluster",
    )
    serve.add_argument(
        "--replicas",
        type=_replicas,
        help="with --ray: media worker replicas, or auto: as many as the sessions need, "
        "between VISIONSTREAM_RAY_MIN_REPLICAS and _MAX_REPLICAS (default: one per CPU)",
    )
    serve.set_defaults(func=_serve)
    stream = command("stream", "stream a source to a server and show or save the results")
    _add_stream_arguments(stream)
    stream.set_defaults(func=_stream)
    bench = command("bench", "run a benchmark: visionstream bench NAME [args]", add_help=False)
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=_bench)
    _add_deploy(command)
    add_models_commands(command, _HelpFormatter)
    add_keys_commands(command)
    return parser


def _add_deploy(command: Command) -> None:
    deploy = command("deploy", "print a deployment's manifest")
    targets = deploy.add_subparsers(dest="deploy_target", required=True)
    kuberay = targets.add_parser(
        "kuberay",
        help="a KubeRay RayService (GPU nodes, WebRTC notes)",
        formatter_class=_HelpFormatter,
    )
    kuberay.add_argument(
        "--image",
        default="visionstream:latest",
        help="the Dockerfile's image, built with EXTRAS=ray",
    )
    kuberay.add_argument("--workers", type=int, default=1, help="GPU worker nodes (pods)")
    kuberay.add_argument(
        "--replicas",
        type=_replicas,
        default="auto",
        help="media replicas: a count, or auto (by sessions)",
    )
    kuberay.add_argument("--max-replicas", type=int, default=16, help="with auto: the most")
    kuberay.add_argument(
        "--gpu-share",
        type=float,
        default=0.0625,
        help="GPU share of each replica and pipeline (1/16)",
    )
    kuberay.add_argument("--port", type=int, default=9001, help="the HTTP port on every node")
    kuberay.set_defaults(func=_deploy_kuberay)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    if not (sys.argv[1:] if argv is None else argv):
        parser.print_help()  # a bare "visionstream": what it does, not argparse's complaint
        return 0
    args = parser.parse_args(argv)
    # The client command keeps the terminal for its status line: warnings only.
    logging.basicConfig(
        level=logging.WARNING if args.command == "stream" else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Other libraries' INFO lines (alembic's seven plugin lines on every start) are noise.
    for library in ("httpx", "aioice", "aiortc", "alembic"):
        logging.getLogger(library).setLevel(logging.WARNING)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
