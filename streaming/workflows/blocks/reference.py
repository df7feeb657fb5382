"""The guide's block reference (``docs/guide/blocks.md``), written from the declarations: one
entry per block (its own heading, so the site's search finds ``dynamic_crop``), with every
type id that names it, what it does (its class docstring), each field as the compiler checks
it and its outputs. ``python -m streaming.workflows.blocks.reference >
docs/guide/blocks.md`` writes it; ``tests/unit/test_docs.py`` fails when the page and the
code differ."""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

from . import BLOCKS
from .base import Block
from .fields import REQUIRED, FieldSpec

__all__ = ["markdown"]

_HEAD = """# Block reference

Every block a workflow may use, as the code declares it (`streaming/workflows/blocks/`): each
with the type ids that name it (the reference's, and its short names), what it does, its
fields and its outputs. A field *takes* a `selector` (`$inputs.x`, `$steps.s.output`: data
of each frame), a `literal or parameter` (a value, or `$inputs.x` of a parameter), or either.
The compiler checks each value against its field and answers a 400 naming the step and the
field. `GET /workflows/blocks` answers the same, as JSON. This page is written from the code
by `python -m streaming.workflows.blocks.reference`, and a test fails when the two differ.
[Writing workflows](workflows.md) shows how blocks make a workflow.
"""

_CODE = re.compile(r"``(.+?)``")


def _text(text: str) -> str:
    """A docstring as Markdown: its paragraphs kept, rST's ``code`` as Markdown's."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join(_CODE.sub(r"`\1`", p) for p in paragraphs if p)


def _value(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    try:
        shown = json.dumps(value)
    except TypeError:
        shown = repr(value)
    return f"`{shown}`".replace("|", "\\|")


def _accepts(spec: FieldSpec) -> str:
    """What a value of the field must be: its type, range, choices or kinds."""
    said: list[str] = [] if spec.type == "any" else [spec.type]
    for word, bound in (("≥", spec.minimum), (">", spec.above), ("<", spec.below)):
        if bound is not None:
            said.append(f"{word} {bound:g}")
    if spec.maximum is not None:
        said.append(f"≤ {spec.maximum:g}")
    if spec.choices is not None:
        said.append("one of " + ", ".join(_value(c) for c in spec.choices))
    kinds = [k for k in spec.kinds if k != "*"]
    if kinds and spec.takes.per_frame:
        said.append("kinds " + ", ".join(f"`{k}`" for k in kinds))
    return "; ".join(said)


def _fields(cls: type[Block]) -> list[str]:
    if not cls.fields:
        return ["No fields."]
    described = any(spec.description for spec in cls.fields.values())
    rows = ["| field | takes | value | default |" + (" |" if described else "")]
    rows.append("|---|---|---|---|" + ("---|" if described else ""))
    for name, spec in cls.fields.items():
        default = "required" if spec.default is REQUIRED else _value(spec.default)
        row = f"| `{name}` | {spec.takes.shown} | {_accepts(spec)} | {default} |"
        if described:
            row += " " + _text(spec.description).replace("\n\n", " ").replace("|", "\\|") + " |"
        rows.append(row)
    return rows


def _names(type_ids: list[str]) -> list[str]:
    """The block's type ids, the namespaced ones first (the entry's heading)."""
    return sorted(type_ids, key=lambda t: ("/" not in t, t))


def _entry(type_ids: list[str], cls: type[Block]) -> list[str]:
    first, *others = _names(type_ids)
    lines = [f"## `{first}`", ""]
    if others:
        lines += ["Also " + ", ".join(f"`{t}`" for t in others) + ".", ""]
    if doc := inspect.getdoc(cls):
        lines += [_text(doc), ""]
    lines += _fields(cls)
    outputs = ", ".join(f"`{name}` ({kind})" for name, kind in cls.outputs.items())
    lines += ["", f"Outputs: {outputs or 'none'}.", ""]
    return lines


def markdown() -> str:
    by_class: dict[type[Block], list[str]] = {}
    for type_id, cls in BLOCKS.items():
        by_class.setdefault(cls, []).append(type_id)
    entries = sorted(by_class.items(), key=lambda item: _names(item[1])[0])
    lines = [_HEAD]
    for cls, type_ids in entries:
        lines += _entry(type_ids, cls)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
