"""A self-signed certificate for 127.0.0.1 (and localhost), made with openssl for a test's
own TLS server; the certificate is also the CA file its clients trust."""

from __future__ import annotations

import subprocess
from pathlib import Path


def loopback_certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """``(certificate, key)`` files in ``directory``, valid for two days."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
