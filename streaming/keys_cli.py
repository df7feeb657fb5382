"""``visionstream keys``: named API keys with roles in the file ``VISIONSTREAM_AUTH_KEYS_FILE``
names (``add`` prints the new key once; only its hash is stored), listed and removed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["add_keys_commands"]

Command = Callable[..., argparse.ArgumentParser]


def add_keys_commands(command: Command) -> None:
    keys = command("keys", "manage named API keys with roles (VISIONSTREAM_AUTH_KEYS_FILE)")
    keys.add_argument(
        "--file", type=Path, help="the keys file (default VISIONSTREAM_AUTH_KEYS_FILE)"
    )
    actions = keys.add_subparsers(dest="keys_command", required=True)
    add = actions.add_parser("add", help="a new key: printed once, stored hashed")
    add.add_argument("name", help="who or what holds it (shown in logs and /auth/me)")
    add.add_argument("--role", required=True, choices=["viewer", "operator", "admin"])
    add.add_argument("--expires", help="a date (2027-01-31) or time after which it is refused")
    add.set_defaults(func=_add)
    actions.add_parser("list", help="names, roles and expiry").set_defaults(func=_list)
    remove = actions.add_parser("remove", help="a key stops working at once")
    remove.add_argument("name")
    remove.set_defaults(func=_remove)


def _file(args: argparse.Namespace) -> Path:
    from .access import AuthSettings

    path = args.file or AuthSettings().keys_file  # its old name too (settings/prefix.py)
    if not path:
        raise SystemExit("name the keys file: --file PATH or VISIONSTREAM_AUTH_KEYS_FILE")
    return Path(path)


def _add(args: argparse.Namespace) -> int:
    from .access import Role
    from .server.keys import add_key

    expires = datetime.fromisoformat(args.expires) if args.expires else None
    if expires is not None and expires.tzinfo is None:
        expires = expires.replace(tzinfo=UTC)
    key = add_key(_file(args), args.name, Role.named(args.role), expires)
    print(key)  # the only time it is shown
    print(f"{args.name}: {args.role} key added to {_file(args)}", file=sys.stderr)
    return 0


def _stored(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text() or "{}") if path.exists() else {"keys": []}


def _list(args: argparse.Namespace) -> int:
    for key in _stored(_file(args)).get("keys", []):
        print(f"{key['name']}\t{key['role']}\t{key.get('expires') or 'never expires'}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from .server.keys import remove_key

    if not remove_key(_file(args), args.name):
        print(f"no key named {args.name!r} in {_file(args)}", file=sys.stderr)
        return 1
    return 0
