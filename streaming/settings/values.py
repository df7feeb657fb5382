"""How settings read the environment's text."""

from __future__ import annotations

__all__ = ["split_csv"]


def split_csv(value: object) -> object:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``; anything else as it is."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value
