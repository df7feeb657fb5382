"""``inner_workflow``: a child workflow inlined into its parent before compiling, as the
reference's engine does in its ``embedded`` mode.

The child is the step's ``workflow_definition``, or a stored workflow of this server
(``workflow_id``, in ``workflow_workspace_id`` ``local``). Its steps join the parent's as
``<step>__<child step>``; each of its inputs becomes what ``parameter_bindings`` maps it to
(a parent selector or a literal; a parameter with a default may go unbound), and the
parent's ``$steps.<step>.<output>`` becomes the child output's selector. A child may hold
inner workflows of its own, up to ``MAX_DEPTH`` deep; a stored workflow that includes
itself is refused. After inlining, the compiler checks the whole as one workflow:
dimensions, kinds and egress alike.

Inlining multiplies: a step used F times at each of four levels is F**4 steps, and a
binding's text is copied into every place that names it. A ``Budget`` (the server's
``VISIONSTREAM_LIMIT_WORKFLOW_STEPS`` and ``VISIONSTREAM_LIMIT_WORKFLOW_BYTES``) is charged as the
copies are made, so a 7 KB request is refused before it has grown past the budget, never
after it has taken gigabytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import WorkflowCompilationError
from .blocks.base import BuildContext
from .spec import WorkflowSpec, parse_spec

__all__ = ["INNER_WORKFLOW_TYPES", "MAX_DEPTH", "Budget", "StoredWorkflows", "budget_of", "inlined"]

INNER_WORKFLOW_TYPES = frozenset({"roboflow_core/inner_workflow@v1"})
MAX_DEPTH = 4
"""Inner workflows within inner workflows, at most (the reference's default)."""

StoredWorkflows = Callable[[str | None, str], dict[str, Any]]
"""A stored workflow's specification by workspace and id (the library's)."""

_INPUT = re.compile(r"\$inputs\.([A-Za-z0-9_-]+)")
_STEP = re.compile(r"\$steps\.([A-Za-z0-9_-]+)((?:\.(?:[A-Za-z0-9_-]+|\*))?)")


@dataclass
class Budget:
    """What a workflow may grow to when its inner workflows are inlined: ``steps`` in all,
    and ``bytes`` of text copied into them. Charged as the copies are made."""

    steps: int
    bytes: int
    used_steps: int = 0
    used_bytes: int = 0

    def charge(self, steps: int = 0, size: int = 0) -> None:
        self.used_steps += steps
        self.used_bytes += size
        if self.used_steps > self.steps:
            raise WorkflowCompilationError(
                f"the workflow has more than {self.steps} steps once its inner workflows are "
                "inlined (VISIONSTREAM_LIMIT_WORKFLOW_STEPS)"
            )
        if self.used_bytes > self.bytes:
            raise WorkflowCompilationError(
                f"the workflow grows past {self.bytes} bytes once its inner workflows are "
                "inlined (VISIONSTREAM_LIMIT_WORKFLOW_BYTES)"
            )


def budget_of(context: BuildContext) -> Budget:
    """A fresh budget from the server's limits."""
    limits = context.limits
    return Budget(steps=limits.workflow_steps, bytes=limits.workflow_bytes)


def inlined(spec: WorkflowSpec, stored: StoredWorkflows | None, budget: Budget) -> WorkflowSpec:
    """``spec`` with every inner workflow inlined (itself when it has none), within
    ``budget``. Blocking: the caller runs it off the event loop."""
    budget.charge(steps=len(spec.steps))
    if not any(step.type in INNER_WORKFLOW_TYPES for step in spec.steps):
        return spec
    return parse_spec(_inline(spec.model_dump(), stored, (), set(), budget))


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(json.dumps(value, default=str))


def _inline(
    data: dict[str, Any],
    stored: StoredWorkflows | None,
    chain: tuple[str, ...],
    taken: set[str],
    budget: Budget,
) -> dict[str, Any]:
    """``data`` with its inner workflows inlined; ``chain``: the stored workflows around it,
    ``taken``: every step name used so far (the parent's and the inlined ones)."""
    taken |= {step["name"] for step in data["steps"]}
    steps: list[dict[str, Any]] = []
    outputs_of: dict[str, dict[str, Any]] = {}
    for step in data["steps"]:
        if step["type"] not in INNER_WORKFLOW_TYPES:
            steps.append(step)
            continue
        name = step["name"]
        mode = step.get("execution_mode", "embedded")
        if mode != "embedded":
            raise WorkflowCompilationError(
                f"step '{name}': execution_mode {mode!r} is not served here; 'embedded' runs "
                "the child's steps in this workflow"
            )
        if len(chain) >= MAX_DEPTH:
            raise WorkflowCompilationError(
                f"step '{name}': inner workflows nest at most {MAX_DEPTH} deep"
            )
        child, label = _child(name, step, stored, chain)
        child = _inline(child, stored, (*chain, label), taken, budget)
        values = _bound(name, step.get("parameter_bindings"), child["inputs"])
        budget.charge(steps=len(child["steps"]))
        sizes = {key: _size(value) for key, value in values.items()}
        renamed: dict[str, str] = {}
        for inner_step in child["steps"]:
            renamed[inner_step["name"]] = _unique(f"{name}__{inner_step['name']}", taken)
        rewrite = _Rewriter(values, sizes, renamed, budget)
        for inner_step in child["steps"]:
            budget.charge(size=_size(inner_step))
            rewritten = rewrite(inner_step)
            steps.append({**rewritten, "name": renamed[inner_step["name"]]})
        outputs_of[name] = {o["name"]: rewrite(o["selector"]) for o in child["outputs"]}
    steps = [_refer(step, outputs_of) for step in steps]
    outputs = [{**o, "selector": _refer(o["selector"], outputs_of)} for o in data["outputs"]]
    return {**data, "steps": steps, "outputs": outputs}


def _child(
    name: str, step: dict[str, Any], stored: StoredWorkflows | None, chain: tuple[str, ...]
) -> tuple[dict[str, Any], str]:
    """The child's specification (checked), and what names it in a chain of stored ones."""
    definition = step.get("workflow_definition")
    workflow_id = step.get("workflow_id")
    if definition and workflow_id:
        raise WorkflowCompilationError(
            f"step '{name}': give workflow_definition or workflow_id, not both"
        )
    if isinstance(definition, dict) and definition:
        return parse_spec(definition).model_dump(), f"{name} (inline)"
    if not isinstance(workflow_id, str) or not workflow_id:
        raise WorkflowCompilationError(
            f"step '{name}': inner_workflow needs a workflow_definition object or a workflow_id"
        )
    workspace = step.get("workflow_workspace_id")
    label = f"{workspace or 'local'}/{workflow_id}"
    if label in chain:
        raise WorkflowCompilationError(
            f"step '{name}': workflow '{label}' includes itself ({' -> '.join((*chain, label))})"
        )
    if stored is None:
        raise WorkflowCompilationError(f"step '{name}': no stored workflows here to name")
    return parse_spec(stored(workspace, workflow_id)).model_dump(), label


def _bound(name: str, bindings: Any, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """What each child input becomes: its binding, else its default."""
    if bindings is None:
        bindings = {}
    if not isinstance(bindings, dict):
        raise WorkflowCompilationError(f"step '{name}': parameter_bindings must be an object")
    declared = {i["name"]: i for i in inputs}
    unknown = sorted(set(bindings) - set(declared))
    if unknown:
        raise WorkflowCompilationError(
            f"step '{name}': parameter_bindings names {unknown}, which the child workflow does "
            f"not take (it takes {sorted(declared)})"
        )
    values: dict[str, Any] = {}
    for input_name, spec in declared.items():
        if input_name in bindings:
            values[input_name] = bindings[input_name]
        elif spec.get("default_value") is not None:
            values[input_name] = spec["default_value"]
        else:
            raise WorkflowCompilationError(
                f"step '{name}': the child workflow's input '{input_name}' is not bound "
                "(parameter_bindings) and has no default"
            )
    return values


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}__{n}"
    taken.add(candidate)
    return candidate


@dataclass
class _Rewriter:
    """A child's values with its inputs replaced by what they are bound to and its steps by
    their new names, at any depth of dicts and lists; each copy of a bound value charged."""

    values: dict[str, Any]
    sizes: dict[str, int]
    renamed: dict[str, str]
    budget: Budget

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, str):
            return value
        whole = _INPUT.fullmatch(value)
        if whole and whole.group(1) in self.values:
            self.budget.charge(size=self.sizes[whole.group(1)])
            return self.values[whole.group(1)]  # a literal keeps its type
        return _INPUT.sub(self._bound, _STEP.sub(self._step, value))

    def _step(self, match: re.Match[str]) -> str:
        old = match.group(1)
        if old not in self.renamed:
            return match.group(0)
        return f"$steps.{self.renamed[old]}{match.group(2)}"

    def _bound(self, match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in self.values:
            return match.group(0)
        self.budget.charge(size=self.sizes[key])  # before the copy is made
        return str(self.values[key])


def _refer(value: Any, outputs_of: dict[str, dict[str, Any]]) -> Any:
    """The parent's references to an inner workflow's outputs, made the child's selectors."""
    if isinstance(value, dict):
        return {k: _refer(v, outputs_of) for k, v in value.items()}
    if isinstance(value, list):
        return [_refer(v, outputs_of) for v in value]
    if not isinstance(value, str) or "$steps." not in value:
        return value

    def target(step: str, output: str) -> Any:
        outputs = outputs_of[step]
        if not output:
            raise WorkflowCompilationError(
                f"'$steps.{step}' names an inner workflow, not a step: flow control gates the "
                "steps inside it, and outputs are named ('$steps.<step>.<output>')"
            )
        if output not in outputs:
            raise WorkflowCompilationError(
                f"'$steps.{step}.{output or '*'}': the inner workflow '{step}' has outputs "
                f"{sorted(outputs)} (name one)"
            )
        return outputs[output]

    whole = _STEP.fullmatch(value)
    if whole and whole.group(1) in outputs_of:
        return target(whole.group(1), whole.group(2).removeprefix("."))

    def replace(match: re.Match[str]) -> str:
        if match.group(1) not in outputs_of:
            return match.group(0)
        return str(target(match.group(1), match.group(2).removeprefix(".")))

    return _STEP.sub(replace, value)
