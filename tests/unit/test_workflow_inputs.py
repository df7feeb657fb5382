"""A workflow's inputs as a stream gives them (a session's or a pipeline's
``workflows_parameters``): a batch input is the one value every frame gets, one left out is
the reference's error naming it, and a definition validates without any of them."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.inference.registry import ModelRegistry
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    registry = ModelRegistry(Settings(models_dir=tmp_path_factory.mktemp("models")))
    yield BuildContext(registry)
    registry.close()


def spec(dimensionality: int = 1) -> dict:
    return {
        "version": "1.0",
        "inputs": [
            {"type": "WorkflowImage", "name": "image"},
            {
                "type": "WorkflowBatchInput",
                "name": "names",
                "kind": ["list_of_values"],
                "dimensionality": dimensionality,
            },
            {"type": "WorkflowParameter", "name": "limit"},
        ],
        "steps": [
            {
                "type": "roboflow_core/property_definition@v1",
                "name": "count",
                "data": "$inputs.names",
                "operations": [{"type": "SequenceLength"}],
            }
        ],
        "outputs": [
            {"type": "JsonField", "name": "count", "selector": "$steps.count.output"},
            {"type": "JsonField", "name": "names", "selector": "$inputs.names"},
        ],
    }


def test_a_streams_batch_input_is_the_value_every_frame_gets(context):
    workflow = compile_workflow(parse_spec(spec()), context, parameters={"names": ["a", "b"]})
    image = np.zeros((8, 8, 3), np.uint8)
    try:
        for _ in range(2):
            assert workflow.run(image, {}, FrameState()) == {"count": 2, "names": ["a", "b"]}
    finally:
        workflow.close()


def test_a_stream_without_a_batch_input_is_refused_naming_it(context):
    with pytest.raises(WorkflowCompilationError, match="`names` defined as `WorkflowBatchInput`"):
        compile_workflow(parse_spec(spec()), context, parameters={})
    with pytest.raises(WorkflowCompilationError, match="given over HTTP as a list of lists"):
        compile_workflow(parse_spec(spec(2)), context, parameters={"names": [["a"]]})


@pytest.mark.parametrize("dimensionality", [1, 2])
def test_a_definition_validates_without_any_value(context, dimensionality):
    workflow = compile_workflow(parse_spec(spec(dimensionality)), context, validating=True)
    assert workflow.output_levels == {"count": dimensionality, "names": dimensionality}
    workflow.close()
