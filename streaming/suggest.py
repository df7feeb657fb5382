"""Did-you-mean: the names nearest to one that was mistyped (difflib's close matches, case
ignored), for errors that start with the fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean", "nearest", "shown"]


def nearest(word: str, choices: Iterable[str], limit: int = 3) -> list[str]:
    """Up to ``limit`` of ``choices`` close to ``word``, closest first."""
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    found = difflib.get_close_matches(word.lower(), list(by_lower), n=limit, cutoff=0.6)
    return [by_lower[f] for f in found]


def did_you_mean(word: str, choices: Iterable[str], limit: int = 3) -> str:
    """``"did you mean 'a'?"`` (or ``'a' or 'b'``), or ``""`` when nothing is close."""
    found = nearest(word, choices, limit)
    return f"did you mean {' or '.join(repr(f) for f in found)}?" if found else ""


def shown(text: str, limit: int = 80) -> str:
    """What the user typed, cut to ``limit`` characters for a message."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"
