"""Shaping values for what comes next: the first value a branch produced, else a default
(``first_non_empty_or_default``: after flow control, one of several branches ran), a
switch over the query language (``expression``: the first case whose condition holds),
the JSON in a text (``json_parser``), a CSV row (``csv_formatter``), and text made from a
template (``string_template``: a VLM step's prompt)."""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from ...bounds import BoundExceeded, WorkflowLimits
from ...errors import InvalidRequest, WorkflowCompilationError
from ..query import Env, QueryCompiler, named_chains
from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import ANY, FieldSpec, Takes

__all__ = [
    "CsvFormatterBlock",
    "ExpressionBlock",
    "FirstNonEmptyOrDefaultBlock",
    "JsonParserBlock",
    "StringTemplateBlock",
]


@dataclass(frozen=True, kw_only=True)
class FirstNonEmptySettings(BlockSettings):
    data: int = setting(FieldSpec(takes=Takes.LIST, type="list"))
    default: Any = setting(FieldSpec(default=None))


class FirstNonEmptyOrDefaultBlock(Block):
    """The first of ``data``'s values that is there (not None: its step ran and gave
    one), else ``default``."""

    type_ids = ("roboflow_core/first_non_empty_or_default@v1", "FirstNonEmptyOrDefault")
    Settings: ClassVar[type[BlockSettings]] = FirstNonEmptySettings
    outputs = {"output": ANY}
    accepts_empty = True

    def __init__(self, name: str, config: FirstNonEmptySettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.default = config.default

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return {"output": next((v for v in inputs["data"] if v is not None), self.default)}


@dataclass(frozen=True, kw_only=True)
class ExpressionSettings(BlockSettings):
    data: list[str] = setting(FieldSpec(takes=Takes.ENTRIES))
    data_operations: dict[str, Any] = setting(FieldSpec(default={}, type="object"))
    switch: dict[str, Any] = setting(FieldSpec(type="object"))


Result = Callable[[dict[str, Any], Env], Any]


class ExpressionBlock(Block):
    """``data``'s values, each through its ``data_operations``; then the result of the
    first of ``switch``'s cases whose condition holds over them (else its ``default``): a
    fixed value (``StaticCaseResult``) or one of the values through more operations
    (``DynamicCaseResult``)."""

    type_ids = ("roboflow_core/expression@v1", "Expression")
    Settings: ClassVar[type[BlockSettings]] = ExpressionSettings
    outputs = {"output": ANY}

    def __init__(self, name: str, config: ExpressionSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        names = set(config.data)
        self.operations = named_chains(
            name, "data", "data_operations", names, config.data_operations
        )
        switch = config.switch
        cases = switch.get("cases")
        if switch.get("type") != "CasesDefinition" or not isinstance(cases, list):
            raise WorkflowCompilationError(
                f"step '{name}': switch must be a CasesDefinition with a list of cases"
            )
        conditions = QueryCompiler(name, "switch", names, "data")
        self.cases: list[tuple[Any, Result]] = []
        for i, case in enumerate(cases):
            if not isinstance(case, dict) or case.get("type") != "CaseDefinition":
                raise WorkflowCompilationError(
                    f"step '{name}': switch case {i} must be a CaseDefinition"
                )
            self.cases.append(
                (
                    conditions.group(case.get("condition")),
                    _result(name, case.get("result"), names, conditions),
                )
            )
        self.default = _result(name, switch.get("default"), names, conditions)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        values = dict(inputs["data"])
        for key, chain in self.operations.items():
            values[key] = chain(values[key], Env(facts=frame.facts))
        env = Env(values, frame.facts)
        for condition, result in self.cases:
            if condition(env, None):
                return {"output": result(values, env)}
        return {"output": self.default(values, env)}


def _result(step: str, node: Any, names: set[str], compiler: QueryCompiler) -> Result:
    """A case's result as a function of the values."""
    kind = node.get("type") if isinstance(node, dict) else None
    if kind == "StaticCaseResult":
        value = node.get("value")
        return lambda values, env: value
    if kind == "DynamicCaseResult":
        parameter = node.get("parameter_name")
        if parameter not in names:
            raise WorkflowCompilationError(
                f"step '{step}': a DynamicCaseResult names '{parameter}', not one of data's"
            )
        chain = compiler.chain(node.get("operations"), "a DynamicCaseResult's operations")
        return lambda values, env: chain(values[parameter], env)
    raise WorkflowCompilationError(
        f"step '{step}': a case's result must be a StaticCaseResult or a DynamicCaseResult"
    )


log = logging.getLogger(__name__)

_JSON_BLOCK = re.compile(r"```json([\s\S]*?)```", flags=re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class JsonParserSettings(BlockSettings):
    expected_fields: list[Any] = setting(FieldSpec(type="list"))


class JsonParserBlock(Block):
    """Text holding JSON (raw, or the first ```json block of a language model's answer):
    each of ``expected_fields`` an output of its own (None where missing), and
    ``error_status`` true when the text does not parse or lacks one of them."""

    type_ids = ("roboflow_core/json_parser@v1",)
    inputs = {
        "raw_json": FieldSpec((ANY,), takes=Takes.FRAME),  # text, a parameter or a model's answer
    }
    Settings: ClassVar[type[BlockSettings]] = JsonParserSettings
    outputs = {"error_status": "boolean"}

    @classmethod
    def outputs_of(cls, given: dict[str, Any]) -> dict[str, str]:
        names = given.get("expected_fields")
        listed = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
        return {"error_status": "boolean", **dict.fromkeys(listed, ANY)}

    def __init__(self, name: str, config: JsonParserSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        fields = config.expected_fields
        if not all(isinstance(f, str) for f in fields):
            raise WorkflowCompilationError(f"step '{name}': expected_fields must be names")
        if "error_status" in fields:
            raise WorkflowCompilationError(
                f"step '{name}': error_status is this block's own output; it cannot be "
                "one of expected_fields"
            )
        self.expected = list(fields)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        text = inputs["raw_json"]
        blocks = _JSON_BLOCK.findall(text) if isinstance(text, str) else []
        try:
            parsed = json.loads(blocks[0] if blocks else text)
        except (TypeError, ValueError) as exc:
            log.warning("step %s: the text is not JSON (%s)", self.name, type(exc).__name__)
            return {"error_status": True, **dict.fromkeys(self.expected)}
        if not isinstance(parsed, dict):
            return {"error_status": True, **dict.fromkeys(self.expected)}
        values = {field: parsed.get(field) for field in self.expected}
        return {"error_status": not all(f in parsed for f in self.expected), **values}


_CSV_INJECTION = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads as a formula at the start of a cell: such text gets a quote."""


@dataclass(frozen=True, kw_only=True)
class CsvFormatterSettings(BlockSettings):
    columns_data: list[str] = setting(FieldSpec(takes=Takes.ENTRIES))
    columns_operations: dict[str, Any] = setting(FieldSpec(default={}, type="object"))


class CsvFormatterBlock(Block):
    """One CSV row (with its header) per element: ``columns_data``'s values, each through
    its ``columns_operations``, and a ``timestamp`` column (UTC, ISO 8601). Text that a
    spreadsheet would run as a formula is quoted with a leading ``'``."""

    type_ids = ("roboflow_core/csv_formatter@v1",)
    Settings: ClassVar[type[BlockSettings]] = CsvFormatterSettings
    outputs = {"csv_content": "string"}

    def __init__(self, name: str, config: CsvFormatterSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        names = set(config.columns_data)
        if "timestamp" in names | set(config.columns_operations):
            raise WorkflowCompilationError(
                f"step '{name}': 'timestamp' is the column this block adds; name yours otherwise"
            )
        self.operations = named_chains(
            name, "columns_data", "columns_operations", names, config.columns_operations
        )

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        row = dict(inputs["columns_data"])
        for key, chain in self.operations.items():
            row[key] = chain(row[key], Env(facts=frame.facts))
        row["timestamp"] = datetime.now(tz=UTC).isoformat()
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(row)
        writer.writerow(_cell(value) for value in row.values())
        return {"csv_content": out.getvalue()}


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_CSV_INJECTION):
        return "'" + value
    return value


@dataclass(frozen=True, kw_only=True)
class StringTemplateSettings(BlockSettings):
    data: list[str] = setting(FieldSpec(default={}, takes=Takes.ENTRIES))
    data_operations: dict[str, Any] = setting(FieldSpec(default={}, type="object"))


class StringTemplateBlock(Block):
    """``template`` with each ``{name}`` (Python's format syntax, format specs too) filled
    from ``data``, each value through its ``data_operations``. Positional placeholders,
    attribute or index access, and names ``data`` lacks are refused, when compiled if the
    template is written in the step; a width or a text over ``VISIONSTREAM_LIMIT_TEXT_CHARS``
    is the frame's 400."""

    type_ids = ("roboflow_core/string_template@v1",)
    inputs = {"template": FieldSpec(("string", ANY), takes=Takes.FRAME_OR_LITERAL)}
    Settings: ClassVar[type[BlockSettings]] = StringTemplateSettings
    outputs = {"output": "string"}

    def __init__(self, name: str, config: StringTemplateSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._names = set(config.data)
        self._operations = named_chains(
            name, "data", "data_operations", self._names, config.data_operations
        )
        self._limits = context.limits

    @classmethod
    def check_given(cls, name: str, given: dict[str, Any]) -> None:
        template, data = given.get("template"), given.get("data") or {}
        if isinstance(template, str) and not template.startswith("$") and isinstance(data, dict):
            try:
                _placeholders(template, set(data))
            except ValueError as exc:
                raise WorkflowCompilationError(f"step '{name}': {exc}") from None

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        template = inputs.get("template")
        if not isinstance(template, str):
            raise InvalidRequest(f"step '{self.name}': template must be text")
        env = Env(facts=frame.facts)
        values = {
            key: self._operations[key](value, env) if key in self._operations else value
            for key, value in (inputs.get("data") or {}).items()
        }
        try:
            _placeholders(template, set(values))
            text = _Bounded(self._limits).vformat(template, (), values)
        except (ValueError, TypeError) as exc:
            raise InvalidRequest(f"step '{self.name}': {exc}") from None
        if len(text) > self._limits.text_chars:
            raise BoundExceeded(
                f"step '{self.name}': a text of {len(text)} characters is over the server's "
                f"{self._limits.text_chars} (VISIONSTREAM_LIMIT_TEXT_CHARS)"
            )
        return {"output": text}


def _placeholders(template: str, names: set[str]) -> None:
    """Raises ``ValueError`` for a placeholder the reference refuses or ``names`` lacks."""
    for _, field, spec, _ in string.Formatter().parse(template):
        if field is None:
            continue
        if field == "" or field.isdigit():
            raise ValueError("templates take named placeholders only, as {name}")
        if "." in field or "[" in field:
            raise ValueError(
                f"{{{field}}}: no attribute or index access in a placeholder; extract the "
                "value with data_operations"
            )
        if field not in names:
            raise ValueError(f"{{{field}}} is not in data (it has {sorted(names)})")
        if spec and "{" in spec:
            _placeholders(spec, names)


class _Bounded(string.Formatter):
    """Format specs' widths and precisions held to the text bound: ``{x:999999999}`` would
    allocate that many characters before any length check."""

    def __init__(self, limits: WorkflowLimits) -> None:
        self._most = limits.text_chars

    def format_field(self, value: Any, format_spec: str) -> str:
        for digits in re.findall(r"\d+", format_spec):
            if len(digits) > 9 or int(digits) > self._most:
                raise ValueError(
                    f"format spec '{format_spec}' is over the server's {self._most} "
                    "characters (VISIONSTREAM_LIMIT_TEXT_CHARS)"
                )
        return super().format_field(value, format_spec)
