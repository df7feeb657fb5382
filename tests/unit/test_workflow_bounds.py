"""A workflow is untrusted input: what a caller writes (a pattern, nesting, sizes, counts)
costs a bounded time and memory, and what is over a bound is a 400 naming the step and the
setting, at compile where the size is written and on the frame where it is not."""

from __future__ import annotations

import time

import numpy as np
import pytest

from streaming.bounds import BoundExceeded, WorkflowLimits
from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState, VideoFacts
from streaming.workflows.query import Env, QueryCompiler
from tests.support.workflows import nested_fan_out

VIDEO = {"frame_number": 1, "fps": 30.0}


def matches(pattern: str, text: str) -> bool:
    chain = QueryCompiler("step", "operations", names=None).chain(
        [{"type": "StringMatches", "regex": pattern}]
    )
    return bool(chain(text, Env({}, VideoFacts.of(VIDEO))))


def test_a_catastrophic_pattern_runs_in_linear_time():
    # (a+)+$ backtracks 2**n times in Python's re: 28 a's took 17-68 s there.
    started = time.perf_counter()
    assert not matches(r"(a+)+$", "a" * 100_000 + "b")
    assert matches(r"(a+)+$", "a" * 100_000)
    assert time.perf_counter() - started < 2.0  # microseconds on RE2; minutes on re
    assert matches(r"^cam-\d+$", "cam-12") and not matches(r"^cam-\d+$", "cam-x")


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [
        (r"(a)\1", "not linear-time"),  # a back reference
        (r"a(?=b)", "not linear-time"),  # look-ahead
        ("a" * 1001, "longer than 1000 characters"),
    ],
)
def test_what_a_linear_time_engine_cannot_run_is_a_400(pattern, needle):
    with pytest.raises(WorkflowCompilationError, match=needle):
        matches(pattern, "ab")


def test_inlining_is_charged_as_it_grows_and_refused_at_the_budget():
    spec = nested_fan_out(fan_out=100, depth=4)  # ~7 KB; inlined, ~6 GB of text
    context = BuildContext(models=None, settings=Settings())  # type: ignore[arg-type]
    started = time.perf_counter()
    with pytest.raises(WorkflowCompilationError, match="VISIONSTREAM_LIMIT_WORKFLOW_BYTES"):
        compile_workflow(parse_spec(spec), context)
    assert time.perf_counter() - started < 2.0


def test_steps_past_the_budget_are_refused():
    limits = WorkflowLimits(workflow_steps=3)
    context = BuildContext(models=None, settings=Settings(limits=limits))  # type: ignore[arg-type]
    with pytest.raises(WorkflowCompilationError, match="more than 3 steps"):
        compile_workflow(parse_spec(nested_fan_out(fan_out=1, depth=4)), context)


def _image_spec(*steps: dict, output: str) -> dict:
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "side", "default_value": 64},
        ],
        "steps": list(steps),
        "outputs": [{"type": "JsonField", "name": "out", "selector": output}],
    }


def _compile(spec: dict, settings: Settings | None = None, **parameters):
    context = BuildContext(models=None, settings=settings or Settings())  # type: ignore[arg-type]
    return compile_workflow(parse_spec(spec), context, parameters=parameters)


def _resize(**fields) -> dict:
    return {
        "type": "roboflow_core/image_preprocessing@v1",
        "name": "big",
        "image": "$inputs.image",
        "task_type": "resize",
        **fields,
    }


def _perspective(**fields) -> dict:
    return {
        "type": "roboflow_core/perspective_correction@v1",
        "name": "warp",
        "images": "$inputs.image",
        "warp_image": True,
        "perspective_polygons": [[[0, 0], [10, 0], [10, 10], [0, 10]]],
        **fields,
    }


@pytest.mark.parametrize(
    "step",
    [
        _resize(width=30000, height=30000),
        _perspective(transformed_rect_width=30000, transformed_rect_height=30000),
    ],
)
def test_a_written_size_over_the_bound_is_refused_when_compiled(step):
    started = time.perf_counter()
    with pytest.raises(WorkflowCompilationError, match="VISIONSTREAM_LIMIT_IMAGE_PIXELS"):
        _compile(_image_spec(step, output=f"$steps.{step['name']}.*"))
    assert time.perf_counter() - started < 1.0


def test_a_size_known_only_on_the_frame_is_checked_on_the_frame():
    # One side written, the other kept in proportion: 30000 wide from a 64-wide frame.
    workflow = _compile(_image_spec(_resize(width=30000, height=None), output="$steps.big.image"))
    image = np.zeros((48, 64, 3), np.uint8)
    try:
        started = time.perf_counter()
        with pytest.raises(BoundExceeded, match=r"30000x22500 .*IMAGE_PIXELS"):
            workflow.run(image, {}, FrameState())
        assert time.perf_counter() - started < 1.0
    finally:
        workflow.close()


def test_slices_and_crops_per_frame_are_bounded():
    slicer = {
        "type": "roboflow_core/image_slicer@v1",
        "name": "tiles",
        "image": "$inputs.image",
        "slice_width": 1,
        "slice_height": 1,
        "overlap_ratio_width": 0,
        "overlap_ratio_height": 0,
    }
    workflow = _compile(_image_spec(slicer, output="$steps.tiles.slices"))
    try:
        started = time.perf_counter()
        with pytest.raises(BoundExceeded, match=r"40000 slices .*VISIONSTREAM_LIMIT_ELEMENTS"):
            workflow.run(np.zeros((200, 200, 3), np.uint8), {}, FrameState())
        assert time.perf_counter() - started < 1.0
        out = workflow.run(np.zeros((32, 32, 3), np.uint8), {}, FrameState())
        assert len(out["out"]) == 1024  # exactly the bound: made
    finally:
        workflow.close()


def _secret_spec(*steps: dict, outputs: list[dict] | None = None) -> dict:
    vault = {
        "type": "roboflow_core/environment_secrets_store@v1",
        "name": "vault",
        "variables_storing_secrets": ["CAMERA_TOKEN"],
    }
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [vault, *steps],
        "outputs": outputs or [{"type": "JsonField", "name": "image", "selector": "$inputs.image"}],
    }


def _webhook(**fields) -> dict:
    return {
        "type": "roboflow_core/webhook_sink@v1",
        "name": "hook",
        "url": "http://127.0.0.1:9/hook",
        **fields,
    }


def _mail(**fields) -> dict:
    return {
        "type": "roboflow_core/email_notification@v1",
        "name": "mail",
        "subject": "s",
        "message": "m",
        "receiver_email": "a@example.test",
        "sender_email": "b@example.test",
        "smtp_server": "127.0.0.1",
        "sender_email_password": "p",
        **fields,
    }


LENT = Settings(workflow_secrets=["CAMERA_TOKEN"])


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        (
            _secret_spec(
                outputs=[
                    {"type": "JsonField", "name": "t", "selector": "$steps.vault.camera_token"}
                ]
            ),
            "output 't'",
        ),
        (
            _secret_spec(
                outputs=[{"type": "JsonField", "name": "all", "selector": "$steps.vault.*"}]
            ),
            "output 'all'",
        ),
        (
            _secret_spec(_webhook(json_payload={"t": "$steps.vault.camera_token"})),
            "json_payload' entry 't'",
        ),
        (
            _secret_spec(_webhook(headers={"X-Leak": "$steps.vault.camera_token"})),
            "headers' entry 'X-Leak'",
        ),
        (
            _secret_spec(_webhook(query_parameters={"t": "$steps.vault.camera_token"})),
            "query_parameters' entry 't'",
        ),
        (
            _secret_spec(_mail(message_parameters={"t": "$steps.vault.camera_token"})),
            "message_parameters' entry 't'",
        ),
        (_secret_spec(_mail(receiver_email="$steps.vault.camera_token")), "receiver_email'"),
    ],
)
def test_a_lent_secret_never_flows_into_an_output_a_message_or_a_payload(spec, where):
    with pytest.raises(WorkflowCompilationError, match=f"{where}.*is a lent secret"):
        _compile(spec, LENT)


def test_a_lent_secret_flows_into_credentials():
    for spec in (
        _secret_spec(_webhook(headers={"Authorization": "$steps.vault.camera_token"})),
        _secret_spec(_mail(sender_email_password="$steps.vault.camera_token")),
    ):
        _compile(spec, LENT).close()


def _file_sink_spec(**fields) -> dict:
    text = {
        "type": "roboflow_core/property_definition@v1",
        "name": "text",
        "data": "$inputs.text",
        "operations": [],
    }  # the parameter as per-frame data
    sink = {
        "type": "roboflow_core/local_file_sink@v1",
        "name": "save",
        "content": "$steps.text.output",
        "output_mode": "separate_files",
        "file_type": "txt",
        "target_directory": "out",
        **fields,
    }
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "text"},
        ],
        "steps": [text, sink],
        "outputs": [{"type": "JsonField", "name": "saved", "selector": "$steps.save.*"}],
    }


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"target_directory": "a\x00b"}, "control character"),
        ({"target_directory": "a\nb"}, "control character"),
        ({"file_name_prefix": "x\r\nInjected: 1"}, "file_name_prefix must be a file name"),
        ({"file_name_prefix": ".hidden"}, "file_name_prefix must be a file name"),
        ({"file_name_prefix": "a\\b"}, "file_name_prefix must be a file name"),
        ({"file_name_prefix": "a\x00"}, "file_name_prefix must be a file name"),
    ],
)
def test_file_sink_names_are_plain(tmp_path, fields, needle):
    settings = Settings(file_sink_dir=tmp_path)
    with pytest.raises(WorkflowCompilationError, match=needle):
        _compile(_file_sink_spec(**fields), settings, text="x")


@pytest.mark.parametrize("mode", ["separate_files", "append_log"])
def test_file_sinks_stop_at_their_quota_and_delete_nothing(tmp_path, mode):
    (tmp_path / "earlier.txt").write_bytes(b"e" * (600 << 10))  # already there: counted
    limits = WorkflowLimits(file_sink_mb=1, file_sink_min_free_mb=0)
    settings = Settings(file_sink_dir=tmp_path, limits=limits)
    text = "x" * (100 << 10)
    workflow = _compile(_file_sink_spec(output_mode=mode), settings, text=text)
    try:
        saved = [
            workflow.run(np.zeros((8, 8, 3), np.uint8), {}, FrameState())["saved"] for _ in range(6)
        ]
    finally:
        workflow.close()
    assert [s["error_status"] for s in saved] == [False] * 4 + [True] * 2
    assert "quota" in saved[-1]["message"] and str(tmp_path) not in saved[-1]["message"]
    assert (tmp_path / "earlier.txt").exists()
    written = sum(f.stat().st_size for f in (tmp_path / "out").iterdir())
    assert written == 4 * (len(text) + 1)


def test_file_sinks_leave_the_disks_floor_free(tmp_path):
    limits = WorkflowLimits(file_sink_min_free_mb=1 << 30)  # a petabyte: more than any disk
    workflow = _compile(
        _file_sink_spec(), Settings(file_sink_dir=tmp_path, limits=limits), text="x"
    )
    try:
        saved = workflow.run(np.zeros((8, 8, 3), np.uint8), {}, FrameState())["saved"]
    finally:
        workflow.close()
    assert saved["error_status"] and "free" in saved["message"]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_event_sinks_evidence_is_capped_by_the_server(tmp_path):
    sink = {"type": "visionstream/event_sink@v1", "name": "evidence", "max_megabytes": 5000}
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [sink],
        "outputs": [{"type": "JsonField", "name": "out", "selector": "$steps.evidence.event_id"}],
    }
    context = BuildContext(models=None, sink_dir=tmp_path, settings=Settings())  # type: ignore[arg-type]
    with pytest.raises(WorkflowCompilationError, match="VISIONSTREAM_LIMIT_FILE_SINK_MB"):
        compile_workflow(parse_spec(spec), context)


@pytest.mark.parametrize(
    "step",
    [
        {"type": "roboflow_core/image_blur@v1", "kernel_size": 30001},
        {"type": "roboflow_core/morphological_transformation@v2", "kernel_size": 30000},
        {"type": "roboflow_core/motion_detection@v1", "morphological_kernel_size": 30000},
    ],
)
def test_kernels_are_bounded_when_compiled(step):
    spec = _image_spec({"name": "k", "image": "$inputs.image", **step}, output="$steps.k.*")
    with pytest.raises(WorkflowCompilationError, match="VISIONSTREAM_LIMIT_KERNEL_SIZE"):
        _compile(spec)
