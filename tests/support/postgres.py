"""A real PostgreSQL (Debian's) on a free loopback port: its cluster made by ``initdb`` in a
temporary directory and run as an unprivileged user (PostgreSQL refuses to run as root).
``stop`` and ``start`` keep the data: a database that goes away and comes back."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tests.support.server import LoggedProcess, free_port

__all__ = ["PostgresServer", "postgres_available"]


def _binary(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def postgres_available() -> bool:
    return _binary("initdb") is not None and _binary("postgres") is not None


def _as_user() -> list[str]:
    """The prefix that runs a command as ``nobody`` when we are root."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]


class PostgresServer:
    """``url`` is ``postgresql://postgres@127.0.0.1:port/postgres`` (trust auth on loopback)."""

    def __init__(self, durable: bool = False) -> None:
        """``durable``: fsync on, as in production (benchmarks); the tests run without."""
        self._durable = durable
        # Its own directory under /tmp: pytest's are private to root, and unreachable for
        # the unprivileged user the server runs as.
        self._root = Path(tempfile.mkdtemp(prefix="visionstream-pg-"))
        self.directory = self._root / "data"
        self.directory.mkdir(mode=0o700)
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            for path in (self._root, self.directory):
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        initdb = _binary("initdb")
        assert initdb is not None, "Debian's postgresql is not installed (tests/install.sh)"
        subprocess.run(
            [*_as_user(), initdb, "-D", str(self.directory), "-U", "postgres",
             "--auth=trust", "--no-sync", "-E", "UTF8"],
            check=True, capture_output=True, cwd="/",
        )  # fmt: skip
        self._process: LoggedProcess | None = None
        self.start()

    def start(self) -> None:
        postgres = _binary("postgres")
        assert postgres is not None
        self._process = LoggedProcess(
            [*_as_user(), postgres, "-D", str(self.directory), "-p", str(self.port),
             "-h", "127.0.0.1", "-k", str(self.directory),
             "-c", f"fsync={'on' if self._durable else 'off'}"],
            cwd="/",
        )  # fmt: skip
        self._process.wait_for_output("ready to accept connections", timeout=60)

    def stop(self) -> None:
        """Stops the server (fast shutdown: clients are disconnected). Idempotent."""
        # SIGINT is PostgreSQL's fast shutdown (SIGTERM's "smart" one waits for clients).
        self._halt(signal.SIGINT)

    def kill(self) -> None:
        """Stops it at once, as a crash would (SIGQUIT: no checkpoint)."""
        self._halt(signal.SIGQUIT)

    def _halt(self, how: signal.Signals) -> None:
        if self._process is not None:
            self._process.process.send_signal(how)
            self._process.process.wait(60)
            self._process.stop()
            self._process = None

    def close(self) -> None:
        """Stops it and removes its data. Idempotent."""
        self.stop()
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
