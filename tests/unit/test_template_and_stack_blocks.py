"""``string_template`` (a VLM step's prompt made from workflow data) and ``image_stack`` (the
stream's last frames for a VLM step): what they make, and the bounds a caller's template or
sizes cannot pass."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from streaming.bounds import BoundExceeded
from streaming.errors import InvalidRequest, WorkflowCompilationError
from streaming.workflows.blocks.formatters import StringTemplateBlock
from streaming.workflows.blocks.images import WorkflowImage
from streaming.workflows.blocks.stacks import ImageStackBlock
from tests.support.blocks import build, compile_spec, run_block


def test_a_template_fills_named_placeholders_with_format_specs_and_operations():
    block = build(
        StringTemplateBlock,
        data={"names": None, "score": None},
        data_operations={"names": [{"type": "SequenceJoin", "separator": ", "}]},
    )
    (out,) = run_block(
        block,
        [
            {
                "template": "Seen {names} ({score:.2f}), {{literal}}",
                "data": {"names": ["a", "b"], "score": 0.456},
            }
        ],
    )
    assert out == {"output": "Seen a, b (0.46), {literal}"}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{} found", "named placeholders only"),
        ("{0} found", "named placeholders only"),
        ("{n.real}", "no attribute or index access"),
        ("{missing}", "not in data"),
    ],
)
def test_a_template_the_reference_refuses_is_refused_when_compiled(template, message):
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            {
                "type": "roboflow_core/string_template@v1",
                "name": "t",
                "template": template,
                "data": {"n": 1},
            }
        ],
        "outputs": [{"type": "JsonField", "name": "t", "selector": "$steps.t.output"}],
    }
    with pytest.raises(WorkflowCompilationError, match=message):
        compile_spec(spec)


def test_a_width_or_a_text_over_the_bound_is_the_frames_400():
    block = build(StringTemplateBlock, data={"n": None})
    with pytest.raises(InvalidRequest, match="VISIONSTREAM_LIMIT_TEXT_CHARS"):
        run_block(block, [{"template": "{n:>999999999999}", "data": {"n": 1}}])
    with pytest.raises(BoundExceeded, match="VISIONSTREAM_LIMIT_TEXT_CHARS"):
        run_block(block, [{"template": "{n}", "data": {"n": "x" * 2_000_000}}])
    with pytest.raises(InvalidRequest, match="not in data"):
        run_block(block, [{"template": "{other}", "data": {"n": 1}}])


def test_a_stack_keeps_the_last_frames_newest_first_shrunk_and_clears_on_demand():
    block = build(ImageStackBlock)
    frames = [np.full((1080, 1920, 3), shade, np.uint8) for shade in (10, 120, 240)]
    given = [
        {"image": WorkflowImage(f, "f"), "stack_size": 2, "resolution_width": 640} for f in frames
    ]
    outs = run_block(block, given)
    assert [o["frames_count"] for o in outs] == [1, 2, 2]
    newest, older = (
        cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR) for b in outs[-1]["frames"]
    )
    assert newest.shape == (360, 640, 3) and abs(int(newest.mean()) - 240) <= 2
    assert abs(int(older.mean()) - 120) <= 2
    (cleared,) = run_block(block, [{**given[0], "clear": True}])
    assert cleared["frames_count"] == 1
    (bounded,) = run_block(block, [{**given[0], "stack_size": 10_000}])
    assert bounded["frames_count"] == 2  # one more than the cleared stack: within 64
