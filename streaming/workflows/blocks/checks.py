"""Field checks at compile time: each failure a 400 that names the step and the field."""

from __future__ import annotations

from typing import Any

import supervision as sv

from ...errors import WorkflowCompilationError

__all__ = ["anchor", "color", "points", "polygons"]


def points(step: str, name: str, value: Any, count: int | None = None, least: int = 1) -> list:
    """``[[x, y], ...]``: exactly ``count`` points, or at least ``least``."""
    shape = f"exactly {count}" if count is not None else f"at least {least}"
    ok = isinstance(value, list | tuple) and (
        len(value) == count if count is not None else len(value) >= least
    )
    if ok:
        ok = all(
            isinstance(p, list | tuple)
            and len(p) == 2
            and all(isinstance(c, int | float) and not isinstance(c, bool) for c in p)
            for p in value
        )
    if not ok:
        raise WorkflowCompilationError(
            f"step '{step}': {name} must be a list of {shape} [x, y] points, got {value!r}"
        )
    return [[float(c) for c in p] for p in value]


def anchor(step: str, name: str, value: Any) -> sv.Position:
    try:
        return sv.Position(value)
    except ValueError:
        known = ", ".join(p.value for p in sv.Position)
        raise WorkflowCompilationError(
            f"step '{step}': {name} must be one of {known}, got {value!r}"
        ) from None


def polygons(step: str, name: str, value: Any) -> list[list[list[float]]]:
    """One polygon (``[[x, y], ...]``, 3 points or more) or a list of them."""
    several = (
        isinstance(value, list | tuple)
        and len(value) > 0
        and isinstance(value[0], list | tuple)
        and len(value[0]) > 0
        and isinstance(value[0][0], list | tuple)
    )
    return [points(step, name, p, least=3) for p in (value if several else [value])]


def color(step: str, name: str, value: Any) -> sv.Color:
    """A hex colour (``#5bb573``) or one of supervision's names (``WHITE``, ``black``)."""
    if isinstance(value, str) and not value.startswith("#"):
        named = getattr(sv.Color, value.upper(), None)
        if isinstance(named, sv.Color):
            return named
    try:
        return sv.Color.from_hex(value)
    except (ValueError, TypeError, AttributeError):
        raise WorkflowCompilationError(
            f"step '{step}': {name} must be a hex color like '#5bb573' or a name like "
            f"'WHITE', got {value!r}"
        ) from None
