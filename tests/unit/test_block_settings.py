"""Blocks are written against typed settings: one attribute per field that is not per frame,
checked when the class is defined, built by the compiler from the checked values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from streaming.workflows.blocks import BLOCKS
from streaming.workflows.blocks.base import (
    Block,
    BlockSettings,
    FlowControlBlock,
    FrameState,
    Verdict,
    setting,
)
from streaming.workflows.blocks.fields import FieldSpec, Takes
from streaming.workflows.blocks.tracking import ByteTrackerBlock, ByteTrackerSettings
from tests.support.blocks import build


def test_every_block_s_settings_name_its_fields_that_are_not_per_frame() -> None:
    for type_id, cls in BLOCKS.items():
        literal = {name for name, spec in cls.fields.items() if not spec.per_frame}
        assert cls.Settings.names() == literal, type_id


@pytest.mark.parametrize(
    ("per_frame", "attributes", "said"),
    [
        (
            {"limit": FieldSpec(default=1, type="integer")},
            {},
            r"\['limit'\] in inputs are not per frame",
        ),
        ({}, {"threshold": None}, r"\['threshold'\] declare no field"),
        (
            {"threshold": FieldSpec(takes=Takes.FRAME)},
            {"threshold": FieldSpec()},
            r"\['threshold'\] declared in inputs and on Settings",
        ),
    ],
)
def test_a_field_declared_twice_or_not_at_all_is_refused_when_the_block_is_defined(
    per_frame: dict[str, FieldSpec], attributes: dict[str, FieldSpec | None], said: str
) -> None:
    namespace: dict[str, Any] = {"__annotations__": dict.fromkeys(attributes, "float")}
    namespace |= {name: setting(spec) for name, spec in attributes.items() if spec is not None}
    declared = dataclass(frozen=True, kw_only=True)(type("Declared", (BlockSettings,), namespace))

    with pytest.raises(TypeError, match=said):

        class _Broken(Block):  # pyright: ignore[reportUnusedClass]
            type_ids = ("test/broken@v1",)
            inputs = per_frame
            Settings = declared
            outputs: dict[str, str] = {}

            def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
                return {}


def test_a_block_gets_its_settings_typed() -> None:
    defaults = {k: s.default for k, s in ByteTrackerBlock.fields.items() if not s.per_frame}
    settings = ByteTrackerBlock.settings(defaults)
    assert isinstance(settings, ByteTrackerSettings)
    assert settings.track_activation_threshold == 0.25 and settings.tracker == "bytetrack"
    # As the compiler makes it: an integer where a number is wanted is checked to a float.
    assert build(ByteTrackerBlock, track_activation_threshold=1, tracker="sort") is not None


def test_flow_control_is_a_verdict_not_an_output() -> None:
    flow = [cls for cls in set(BLOCKS.values()) if issubclass(cls, FlowControlBlock)]
    assert {cls.__name__ for cls in flow} == {"ContinueIfBlock", "DeltaFilterBlock",
                                              "RateLimiterBlock"}  # fmt: skip
    assert all(cls.outputs == {} for cls in flow)
    assert Verdict.of(True) is Verdict.RUN and Verdict.of(False) is Verdict.SKIP


_WRONG_TYPE = {"string": 12345, "boolean": "yes", "list": "x", "object": [1], "integer": 1.5,
               "number": "many"}  # fmt: skip


def test_every_field_of_every_block_refuses_what_it_does_not_take() -> None:
    """The one checker the compiler runs on every literal and parameter: each bounded or
    typed field of each block refuses a value out of its bounds, choices or type, with our
    error naming the step and the field."""
    from streaming.errors import WorkflowCompilationError

    checked = 0
    for cls in BLOCKS.values():
        for name, spec in cls.fields.items():
            bad: list[Any] = []
            if spec.choices is not None:
                bad.append("\x00not one of them")
            elif spec.type in _WRONG_TYPE:
                bad.append(_WRONG_TYPE[spec.type])
            if spec.choices is None and spec.type in ("number", "integer"):
                bad += [v - 1 for v in (spec.minimum,) if v is not None]
                bad += [v + 1 for v in (spec.maximum,) if v is not None]
                bad += [v for v in (spec.above, spec.below) if v is not None]
            for value in bad:
                with pytest.raises(WorkflowCompilationError, match=f"step 's': {name} must be"):
                    spec.check("s", name, value)
                checked += 1
    assert checked > 300  # every block's fields, not a few


def test_the_every_block_workflow_holds_every_block_we_ship() -> None:
    """``tests/support/every_block.py`` runs each block type over HTTP and WebRTC
    (``tests/e2e/test_sdk_http.py``); a type it leaves out names the test that runs it
    (``ELSEWHERE``), and that test exists. A new block type fails here until it is in one."""
    from pathlib import Path

    from tests.support.every_block import ELSEWHERE, every_block_workflow

    written = {step["type"] for step in every_block_workflow()["steps"]}
    assert set(BLOCKS) - written - set(ELSEWHERE) == set()
    assert not written & set(ELSEWHERE), "a type both in the workflow and elsewhere"
    root = Path(__file__).resolve().parents[2]
    for type_id, where in ELSEWHERE.items():
        path, _, test = where.partition("::")
        assert f"def {test}(" in (root / path).read_text(), (type_id, where)


def test_every_field_with_a_default_takes_it_when_fed_a_parameter_given_no_value() -> None:
    """The reference passes None for a parameter with neither a value nor a default; each
    field with a default of its own takes that instead, and the block's settings are built
    from it, for every field of every step of the every-block workflow."""
    from streaming.workflows.binding import Compiler
    from streaming.workflows.blocks.fields import REQUIRED
    from streaming.workflows.spec import parse_spec
    from tests.support.every_block import every_block_workflow

    spec = every_block_workflow()
    spec["inputs"].append({"type": "WorkflowParameter", "name": "unset"})
    fed = 0
    for written in spec["steps"]:
        fields = BLOCKS[written["type"]].fields
        for name, field in fields.items():
            if field.takes is Takes.LITERAL and field.default is not REQUIRED:
                written[name] = "$inputs.unset"
                fed += 1
    parsed = parse_spec(spec)
    compiler = Compiler(parsed, "image", "video_metadata", {})
    for step in parsed.steps:
        bound = compiler.bind(step)
        assert not bound.unset
        bound.block_cls.settings(bound.config)  # every field set: the settings are whole
    assert fed > 300
