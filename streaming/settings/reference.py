"""The guide's settings page (``docs/guide/settings.md``), written from the declarations: each
concern's class docstring, then every field's variable, default and docstring; a field that
is a group of its own (``VISIONSTREAM_SMTP_*``) lists that group's fields. ``python -m
streaming.settings.reference > docs/guide/settings.md`` writes it; ``tests/unit/test_docs.py``
fails when the page and the code differ."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from .prefix import PREFIX

__all__ = ["docstrings", "markdown"]

_HEAD = """# Settings

Every setting of the server, read from the environment (prefix `VISIONSTREAM_`, the client's
too; the old `STREAMING_` names are still read, and the server names those it read when it
starts; also from the command line where `visionstream serve --help` says so). Grouped as
the code declares them (`streaming/settings/`), each described where it is declared: this
page is written from there by `python -m streaming.settings.reference`, and a test fails
when the two differ.
What the security settings mean together: [Security](security.md).
"""


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None or isinstance(value, SecretStr):
        return "unset"
    if isinstance(value, BaseModel):
        return ""
    if isinstance(value, Path):  # under the home directory: the same page on any machine
        home = Path.home()
        return f"`~/{value.relative_to(home)}`" if value.is_relative_to(home) else f"`{value}`"
    if isinstance(value, list | tuple):
        return f"`{','.join(map(str, value))}`" if value else "none"
    if isinstance(value, dict):
        return "`" + ",".join(f"{k}={v}" for k, v in value.items()) + "`" if value else "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def docstrings(model: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring (the string under it where ``model`` and its bases declare it),
    read from their source when the page is written, not when the server starts."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
        except (OSError, TypeError):
            continue  # pydantic's own bases
        assert isinstance(body, ast.ClassDef)
        for node, after in zip(body.body, body.body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                found[node.target.id] = after.value.value
    return found


def _text(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows, said = [], docstrings(model)
    for name, field in model.model_fields.items():
        group, text = field.annotation, _text(said.get(name, ""))
        if inspect.isclass(group) and issubclass(group, BaseModel):
            inner = group.model_config.get("env_prefix", f"{prefix}{name.upper()}_")
            rows.append(f"| `{inner}*` | | {text} |")
            rows.extend(_rows(group, str(inner)))
            continue
        rows.append(f"| `{prefix}{name.upper()}` | {_default(field)} | {text} |")
    return rows


def markdown() -> str:
    """The page, from ``config.CONCERNS``."""
    from ..config import CONCERNS

    parts = [_HEAD]
    for concern in CONCERNS:
        title = concern.__name__.removesuffix("Settings")
        about = " ".join((inspect.getdoc(concern) or "").split())
        about = about.split(" A part of ``Settings``")[0]
        parts.append(f"\n## {title}\n{about}\n\n| variable | default | |\n|---|---|---|")
        parts.extend(_rows(concern, PREFIX))
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
