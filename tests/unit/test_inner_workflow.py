"""``inner_workflow``: a child workflow (inline, or stored in the server's library) inlined
into its parent, its inputs bound to the parent's selectors or literals, its outputs read as
the step's; and what is refused, each with a message naming the step."""

from __future__ import annotations

import asyncio
import copy
import json

import numpy as np
import pytest

from streaming.config import Settings
from streaming.egress import EgressPolicy, EgressRefused
from streaming.errors import WorkflowCompilationError
from streaming.inference.registry import ModelRegistry
from streaming.protocol.messages import WorkflowConfiguration
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from streaming.workflows.library import WorkflowLibrary, WorkflowNotFound
from streaming.workflows.runner import compile_config
from tests.support.onnx_models import YOLO_ROWS, colour_classifier_directory, model_directory

DOG_BOX, CAT_BOX = (15, 18, 25, 30), (36, 36, 44, 44)  # the fixed detector's, in pixels


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    model_directory(root, "boxes", [("output", YOLO_ROWS)], decoder="yolov3")
    colour_classifier_directory(root)
    registry = ModelRegistry(Settings(models_dir=root))
    yield registry
    registry.close()


def scene() -> np.ndarray:
    image = np.zeros((64, 64, 3), np.uint8)
    image[DOG_BOX[1] : DOG_BOX[3], DOG_BOX[0] : DOG_BOX[2]] = (0, 0, 255)  # red
    image[CAT_BOX[1] : CAT_BOX[3], CAT_BOX[0] : CAT_BOX[2]] = (255, 0, 0)  # blue
    return image


def step(kind: str, name: str, **fields) -> dict:
    return {"type": f"roboflow_core/{kind}", "name": name, **fields}


# The child: detect, keep one class (a parameter with a default), classify each kept crop.
CHILD = {
    "version": "1.0",
    "inputs": [
        {"type": "InferenceImage", "name": "picture"},
        {"type": "WorkflowParameter", "name": "keep", "default_value": "dog"},
        {"type": "WorkflowParameter", "name": "model"},
    ],
    "steps": [
        step("roboflow_object_detection_model@v2", "det", images="$inputs.picture",
             model_id="$inputs.model"),
        step("detections_filter@v1", "only", predictions="$steps.det.predictions",
             operations=[{"type": "DetectionsFilter", "filter_operation": {
                 "type": "StatementGroup", "statements": [{
                     "type": "BinaryStatement",
                     "left_operand": {"type": "DynamicOperand", "operations": [
                         {"type": "ExtractDetectionProperty", "property_name": "class_name"}]},
                     "comparator": {"type": "=="},
                     "right_operand": {"type": "DynamicOperand", "operand_name": "keep"}}]}}],
             operations_parameters={"keep": "$inputs.keep"}),
        step("dynamic_crop@v1", "crop", images="$inputs.picture",
             predictions="$steps.only.predictions"),
        step("roboflow_classification_model@v2", "cls", images="$steps.crop.crops",
             model_id="colours"),
    ],
    "outputs": [
        {"type": "JsonField", "name": "kept", "selector": "$steps.only.predictions"},
        {"type": "JsonField", "name": "colours", "selector": "$steps.cls.predictions"},
    ],
}  # fmt: skip


def parent(child: dict | None = None, **step_fields) -> dict:
    inner = step("inner_workflow@v1", "inner",
                 parameter_bindings={"picture": "$inputs.image", "model": "boxes"},
                 **({"workflow_definition": child or CHILD} | step_fields))  # fmt: skip
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            inner,
            step("dimension_collapse@v1", "all", data="$steps.inner.colours"),
        ],
        "outputs": [
            {"type": "JsonField", "name": "kept", "selector": "$steps.inner.kept"},
            {"type": "JsonField", "name": "colours", "selector": "$steps.all.output"},
        ],
    }


def run(spec: dict, models: ModelRegistry, library: WorkflowLibrary | None = None) -> dict:
    context = BuildContext(models, workflows=library.stored if library else None)
    workflow = compile_workflow(parse_spec(spec), context)
    try:
        return workflow.run(scene(), {}, FrameState())
    finally:
        workflow.close()


def test_the_child_runs_inside_the_parent_with_its_bindings_and_defaults(models):
    out = run(parent(), models)
    assert list(out["kept"].data["class_name"]) == ["dog"]  # the child's default
    assert [c["top"] for c in out["colours"]] == ["red"]  # the dog's crop, classified
    spec = parent()
    spec["steps"][0]["parameter_bindings"]["keep"] = "cat"
    out = run(spec, models)
    assert [c["top"] for c in out["colours"]] == ["blue"]


def test_inner_workflows_nest_and_names_do_not_collide(models):
    middle = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "frame"},
                   {"type": "WorkflowParameter", "name": "model"}],
        "steps": [step("inner_workflow@v1", "det", workflow_definition=CHILD,
                       parameter_bindings={"picture": "$inputs.frame", "model": "$inputs.model",
                                           "keep": "cat"})],
        "outputs": [{"type": "JsonField", "name": "colours", "selector": "$steps.det.colours"},
                    {"type": "JsonField", "name": "kept", "selector": "$steps.det.kept"}],
    }  # fmt: skip
    spec = parent(middle)
    spec["steps"][0]["parameter_bindings"] = {"frame": "$inputs.image", "model": "boxes"}
    # A step of the parent's own under the name the inliner would have picked.
    spec["steps"].append(step("roboflow_object_detection_model@v2", "inner__det__det",
                              images="$inputs.image", model_id="boxes"))  # fmt: skip
    out = run(spec, models)
    assert [c["top"] for c in out["colours"]] == ["blue"]


def test_a_stored_workflow_is_named_by_id(models, tmp_path):
    (tmp_path / "colour-of-kept.json").write_text(json.dumps(CHILD))
    library = WorkflowLibrary(tmp_path, "boxes")
    spec = parent()
    del spec["steps"][0]["workflow_definition"]
    spec["steps"][0] |= {"workflow_workspace_id": "local", "workflow_id": "colour-of-kept"}
    assert [c["top"] for c in run(spec, models, library)["colours"]] == ["red"]
    # In the reference's form, the author's Roboflow workspace: the id is looked up here.
    spec["steps"][0]["workflow_workspace_id"] = "acme-corp"
    assert [c["top"] for c in run(spec, models, library)["colours"]] == ["red"]
    spec["steps"][0]["workflow_id"] = "nowhere"
    with pytest.raises(WorkflowNotFound, match="'acme-corp/nowhere' is not stored here") as caught:
        run(spec, models, library)
    assert f"VISIONSTREAM_WORKFLOWS_DIR ({tmp_path})" in caught.value.message
    with pytest.raises(WorkflowNotFound, match="VISIONSTREAM_WORKFLOWS_DIR is not set"):
        run(spec, models, WorkflowLibrary(None, "boxes"))


def test_a_stored_workflow_that_includes_itself_is_refused(models, tmp_path):
    looping = copy.deepcopy(CHILD)
    looping["steps"].append(step("inner_workflow@v1", "again", workflow_id="loop",
                                 parameter_bindings={"picture": "$inputs.picture",
                                                     "model": "$inputs.model"}))  # fmt: skip
    (tmp_path / "loop.json").write_text(json.dumps(looping))
    library = WorkflowLibrary(tmp_path, "boxes")
    spec = parent()
    del spec["steps"][0]["workflow_definition"]
    spec["steps"][0]["workflow_id"] = "loop"
    with pytest.raises(WorkflowCompilationError, match="includes itself"):
        run(spec, models, library)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda s: s["parameter_bindings"].pop("model"), "input 'model' is not bound"),
        (lambda s: s["parameter_bindings"].update(extra=1), "names \\['extra'\\], which"),
        (lambda s: s.update(workflow_id="x"), "not both"),
        (lambda s: s.pop("workflow_definition"), "needs a workflow_definition"),
        (lambda s: s.update(execution_mode="remote_dispatch"), "'remote_dispatch' is not served"),
        (lambda s: s.update(parameter_bindings=[]), "parameter_bindings must be an object"),
    ],
    ids=["unbound", "unknown-binding", "both", "neither", "remote", "bindings-not-object"],
)
def test_what_an_inner_workflow_step_may_not_be(models, change, words):
    spec = parent()
    change(spec["steps"][0])
    with pytest.raises(WorkflowCompilationError, match=words):
        run(spec, models)


def test_outputs_are_named_and_nesting_is_bounded(models):
    spec = parent()
    spec["outputs"][0]["selector"] = "$steps.inner.nothing"
    with pytest.raises(WorkflowCompilationError, match="has outputs \\['colours', 'kept'\\]"):
        run(spec, models)
    spec["outputs"][0]["selector"] = "$steps.inner.*"
    with pytest.raises(WorkflowCompilationError, match="name one"):
        run(spec, models)
    nested = CHILD
    for _ in range(5):
        nested = {
            "version": "1.0",
            "inputs": [{"type": "InferenceImage", "name": "picture"},
                       {"type": "WorkflowParameter", "name": "model"}],
            "steps": [step("inner_workflow@v1", "deeper", workflow_definition=nested,
                           parameter_bindings={"picture": "$inputs.picture",
                                               "model": "$inputs.model"})],
            "outputs": [{"type": "JsonField", "name": "colours",
                         "selector": "$steps.deeper.colours"},
                        {"type": "JsonField", "name": "kept", "selector": "$steps.deeper.kept"}],
        }  # fmt: skip
    with pytest.raises(WorkflowCompilationError, match="nest at most 4 deep"):
        run(parent(nested), models)


def test_a_childs_webhook_passes_the_egress_policy_with_the_parents(models):
    child = copy.deepcopy(CHILD)
    child["steps"].append(step("webhook_sink@v1", "hook", url="http://127.0.0.1:9/x",
                               json_payload={"n": "$steps.only.predictions"}))  # fmt: skip
    policy = EgressPolicy(["192.0.2.0/24"])  # loopback not allowed: nothing is connected to
    with pytest.raises(EgressRefused, match="step 'inner__hook' url"):
        asyncio.run(compile_config(WorkflowConfiguration(), parent(child), BuildContext(models),
                                   egress=policy))  # fmt: skip
