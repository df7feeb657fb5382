"""Named API keys with roles (``VISIONSTREAM_AUTH_KEYS_FILE``), stored hashed, each may expire.

The file is JSON the operator owns (``visionstream keys add`` writes it, mode 0600)::

    {"keys": [{"name": "guard", "role": "viewer", "expires": "2027-01-01T00:00:00+00:00",
               "hash": "sha256:<salt hex>:<digest hex>"}]}

A key is 32 random bytes, so one salted SHA-256 is as hard to invert as the key is to
guess (a slow hash would guard weak passwords, which these are not, at a cost on every
request). The file is read again whenever it changes: a key removed from it stops working
at the next request, without a restart.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..access import Principal, Role
from ..errors import Unauthorized

__all__ = ["KeyEntry", "KeyRing", "add_key", "new_key", "remove_key"]

_PREFIX = "vs_"


def new_key() -> str:
    """A fresh key: what ``visionstream keys add`` prints once."""
    return _PREFIX + secrets.token_urlsafe(32)


def _digest(salt: bytes, key: str) -> bytes:
    return hashlib.sha256(salt + key.encode()).digest()


@dataclass(frozen=True)
class KeyEntry:
    name: str
    role: Role
    salt: bytes
    digest: bytes
    expires: datetime | None = None

    @classmethod
    def of(cls, raw: dict[str, Any]) -> KeyEntry:
        scheme, salt, digest = str(raw["hash"]).split(":")
        if scheme != "sha256":
            raise ValueError(f"key {raw.get('name')!r}: unknown hash {scheme!r}")
        expires = raw.get("expires")
        when = datetime.fromisoformat(expires) if expires else None
        if when is not None and when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return cls(
            str(raw["name"]),
            Role.named(str(raw["role"])),
            bytes.fromhex(salt),
            bytes.fromhex(digest),
            when,
        )

    def stored(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": str(self.role),
            "expires": self.expires.isoformat() if self.expires else None,
            "hash": f"sha256:{self.salt.hex()}:{self.digest.hex()}",
        }


class KeyRing:
    """The keys of ``path``, read again when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        self._entries: list[KeyEntry] = []
        self._load()  # a missing or malformed file stops the server at start, saying why

    def _load(self) -> None:
        stat = self.path.stat()
        seen = (stat.st_mtime_ns, stat.st_size)
        if seen == self._seen:
            return
        data = json.loads(self.path.read_text() or "{}")
        self._entries = [KeyEntry.of(raw) for raw in data.get("keys", [])]
        self._seen = seen

    def match(self, presented: str, now: datetime | None = None) -> Principal | None:
        """The principal of ``presented``, None when no key is it; a 401 saying so when it
        expired. Every entry is compared (constant time each)."""
        # Mid-write or removed: the keys read last stay until it reads again.
        with contextlib.suppress(OSError, ValueError, KeyError):
            self._load()
        found = None
        for entry in self._entries:
            if hmac.compare_digest(_digest(entry.salt, presented), entry.digest):
                found = entry
        if found is None:
            return None
        if found.expires is not None and (now or datetime.now(UTC)) >= found.expires:
            raise Unauthorized(f"the API key {found.name!r} expired on {found.expires:%Y-%m-%d}")
        return Principal(found.name, found.role)

    def names(self) -> list[KeyEntry]:
        self._load()
        return list(self._entries)


def _stored_keys(path: Path) -> list[dict[str, Any]]:
    keys: list[dict[str, Any]] = (
        json.loads(path.read_text() or "{}").get("keys", []) if path.exists() else []
    )
    return keys


def _write(path: Path, keys: list[dict[str, Any]]) -> None:
    """The file replaced whole (readers see the old or the new), readable by its owner only."""
    temporary = path.with_name(path.name + ".new")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump({"keys": keys}, out, indent=2)
    temporary.replace(path)


def add_key(path: Path, name: str, role: Role, expires: datetime | None) -> str:
    """A new key named ``name`` in ``path`` (created 0600, or replacing that name's);
    returns the key, which is stored only hashed."""
    key, salt = new_key(), secrets.token_bytes(16)
    entry = KeyEntry(name, role, salt, _digest(salt, key), expires)
    keys = [k for k in _stored_keys(path) if k.get("name") != name]
    _write(path, [*keys, entry.stored()])
    return key


def remove_key(path: Path, name: str) -> bool:
    """``name``'s key removed from ``path``; False when it had none."""
    keys = _stored_keys(path)
    kept = [k for k in keys if k.get("name") != name]
    _write(path, kept)
    return len(kept) < len(keys)
