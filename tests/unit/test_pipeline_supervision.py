"""A pipeline whose own task fails stops at once and its status says why (in-process: one
Pipeline on a local file; the fault is injected where results fan out to sinks)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, ThreadPoolExecutor

import numpy as np
import pytest
from pydantic import ValidationError

from sources.hub import SourceHub
from streaming.errors import InvalidRequest
from streaming.pipelines.models import InitialisePipelinePayload, resolve_references
from streaming.pipelines.pipeline import Pipeline
from streaming.protocol.workflows import image_blur
from streaming.watching import PipelineResult
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext
from tests.support.media import write_clip

WAIT_S = 30.0


class BrokenPipeline(Pipeline):
    """Fails dispatching its third result, as a bug of ours would."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        dispatch = self.results.dispatch

        async def broken(result: PipelineResult) -> None:
            if result.frame_id == 3:
                raise RuntimeError("a bug in dispatching")
            await dispatch(result)

        self.results.dispatch = broken  # type: ignore[method-assign]


def file_pipeline(kind: type[Pipeline], tmp_path, executor: Executor) -> Pipeline:
    """A pipeline blurring a 30-frame clip, with a JSONL sink."""
    images = (np.full((96, 128, 3), i, np.uint8) for i in range(30))
    clip = write_clip(tmp_path / "clip.mp4", images)
    spec = image_blur()
    payload = InitialisePipelinePayload.model_validate(
        {
            "video_configuration": {"type": "VideoConfiguration", "video_reference": str(clip)},
            "processing_configuration": {"workflow_specification": spec},
            "sink_configuration": {"jsonl": {"name": "results"}},
        }
    )
    references = resolve_references(str(clip), allow_local=True)
    workflow = compile_workflow(parse_spec(spec), BuildContext(None))
    hub = SourceHub(lambda url: None)  # a file source never goes through the hub
    return kind(
        payload, references, [workflow], hub=hub, executor=executor,
        sink_dir=tmp_path, jpeg_quality=80,
    )  # fmt: skip


async def test_a_failed_pipeline_task_stops_the_pipeline_and_says_why(tmp_path, caplog):
    with ThreadPoolExecutor(1) as executor:
        pipeline = file_pipeline(BrokenPipeline, tmp_path, executor)
        try:
            await pipeline.start()
            await asyncio.wait_for(pipeline.wait_terminated(), WAIT_S)
        finally:
            await pipeline.terminate()
    report = pipeline.report()
    events = report["video_source_status_updates"]
    failed = [e for e in events if e["event_type"] == "PIPELINE_FAILED"]
    assert [e["payload"] for e in failed] == [{"task": "_process", "error": "RuntimeError"}]
    assert failed[0]["severity"] == 40
    assert [s["state"] for s in report["sources_metadata"]] == ["ERROR"]
    assert report["completion_statistics"]["sources"][0]["completed_frames"] == 3
    assert (tmp_path / "results.jsonl").read_text().count("\n") == 2  # sinks closed, flushed
    assert "a bug in dispatching" in caplog.text


async def test_a_watcher_hears_when_its_source_ends(tmp_path):
    """The clip ends: a viewer of that source is told so, once, and why."""
    results: list[int] = []
    ended: list[tuple[int | None, str]] = []
    heard = asyncio.Event()

    def on_ended(source_id: int | None, why: str) -> None:
        ended.append((source_id, why))
        heard.set()

    with ThreadPoolExecutor(1) as executor:
        pipeline = file_pipeline(Pipeline, tmp_path, executor)
        pipeline.watch(lambda result: results.append(result.frame_id), on_ended)
        try:
            await pipeline.start()
            await asyncio.wait_for(heard.wait(), WAIT_S)
        finally:
            await pipeline.terminate()
    assert results == list(range(1, 31))  # every frame came before the end was told
    assert ended == [(0, f"the video of source 0 of pipeline {pipeline.pipeline_id} ended")]


def test_srt_references_need_the_relay_installed(monkeypatch, tmp_path):
    (reference,) = resolve_references("srt://10.0.0.9:9000?passphrase=s3cr3t-s3cr3t", False)
    assert reference.kind == "camera"
    monkeypatch.setenv("PATH", str(tmp_path))  # a server without srt-tools
    with pytest.raises(InvalidRequest, match="apt install srt-tools") as refused:
        resolve_references("srt://10.0.0.9:9000?passphrase=s3cr3t-s3cr3t", False)
    assert "s3cr3t" not in str(refused.value)


@pytest.mark.parametrize("reference", ["clip.mp4", "videos/door.mkv", "./clip.mp4"])
def test_a_relative_path_is_the_server_working_directory_s(tmp_path, monkeypatch, reference):
    """As the published SDK's users write it (``video_reference="clip.mp4"``): made absolute
    against the directory the server started in, which the status then shows."""
    monkeypatch.chdir(tmp_path)
    (resolved,) = resolve_references(reference, allow_local=True)
    assert resolved.kind == "file"
    assert resolved.reference == str(tmp_path / reference.removeprefix("./"))


@pytest.mark.parametrize("reference", ["camera1", "clip.mp4!", "rtsp:/cam.mp4"])
def test_a_word_that_is_neither_url_nor_file_is_refused_saying_what_is_taken(reference):
    with pytest.raises(ValidationError, match="a path to a file"):
        InitialisePipelinePayload.model_validate(
            {"video_configuration": {"video_reference": reference}}
        )
