"""What a workflow reaches, checked before it is compiled: every URL its steps would make
the server connect to (for the egress policy), and the role each of its blocks needs."""

from __future__ import annotations

from typing import Any

from ..access import Forbidden, Role, block_role
from .blocks import get_block
from .spec import WorkflowSpec, parse_selector

__all__ = ["check_roles", "workflow_urls"]


def workflow_urls(spec: WorkflowSpec, parameters: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``(where, url)`` for every URL the steps of ``spec`` (parsed, inner workflows already
    inlined: what will be compiled) would make the server connect to, literal or a
    parameter's value, so the caller checks them before compiling."""
    values: dict[str, Any] = {i.name: i.default_value for i in spec.inputs}
    values |= parameters or {}
    found: list[tuple[str, str]] = []
    for step in spec.steps:
        block = get_block(step.type)
        if block is None:
            continue  # compiling says why
        given = step.fields()
        for url_field in block.url_fields:
            if isinstance(url := _given(given, url_field, values), str):
                found.append((f"step '{step.name}' {url_field}", url))
        for host_field, port_field, default_port in block.host_fields:
            host = _given(given, host_field, values)
            port = _given(given, port_field, values, default_port)
            if isinstance(host, str) and isinstance(port, int) and "/" not in host:
                shown = f"[{host}]" if ":" in host else host  # an IPv6 address
                found.append((f"step '{step.name}' {host_field}", f"smtp://{shown}:{port}"))
    return found


def _given(fields: dict[str, Any], field: str, values: dict[str, Any], default: Any = None) -> Any:
    """A step's field as written, or the value of the parameter it names."""
    value = fields.get(field, default)
    selector = parse_selector(value) if isinstance(value, str) else None
    return values.get(selector.name) if selector and selector.step is None else value


def check_roles(spec: WorkflowSpec, role: Role) -> None:
    """A 403 naming the first step (of an inlined ``spec``) whose block needs more than
    ``role`` (``access.BLOCKS``: the server's relay, disk, secrets)."""
    for step in spec.steps:
        needed, why = block_role(step.type, step.fields())
        if role < needed:
            raise Forbidden(
                f"step '{step.name}' ({step.type}) needs the {needed} role: {why}; this "
                f"caller is a {role}"
            )
