"""Workflows run over HTTP: one request's images are the frames of one short stream, run in
order through the one run path (``compile_config``, ``run_frame``) on the server's worker
threads, as a session runs its frames. The workflow is compiled for the request and closed
with it: blocks that keep state (trackers, counters, rate limiters) start afresh with each
request and carry it across that request's images."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..bounds import BoundExceeded
from ..errors import WorkflowRunError
from ..protocol.messages import WorkflowConfiguration
from ..workflows import CompiledWorkflow
from ..workflows.blocks.base import BuildContext, FrameState
from ..workflows.runner import FrameFacts, FrameRun, compile_config, run_frame, run_frames
from .http import current_caller, current_principal
from .state import ServerState

__all__ = ["HTTP_STREAM", "compiled", "run_images"]

HTTP_STREAM = "http"
"""``video_identifier`` of a request's images, as ``webrtc`` is a session's."""


@asynccontextmanager
async def compiled(
    state: ServerState,
    config: WorkflowConfiguration,
    specification: dict[str, Any],
    *,
    batched: frozenset[str] = frozenset(),
    validating: bool = False,
) -> AsyncIterator[CompiledWorkflow]:
    """``specification`` compiled for one request (its URLs checked against the egress
    policy first), closed when the request is done with it. ``batched`` and ``validating``:
    as ``compile_workflow`` takes them."""
    context = BuildContext(
        state.models,
        sink_dir=state.settings.sink_dir,
        settings=state.settings,
        workflows=state.workflows.stored,
        caller=current_caller(),
        role=current_principal().role,
        language=state.language,
    )
    workflow = await compile_config(
        config,
        specification,
        context,
        egress=state.egress,
        batched=batched,
        validating=validating,
    )
    try:
        yield workflow
    finally:
        await asyncio.to_thread(workflow.close)


async def run_images(
    state: ServerState,
    workflow: CompiledWorkflow,
    images: Sequence[np.ndarray],
    per_image: Sequence[dict[str, Any]] = (),
) -> list[tuple[FrameRun, FrameFacts]]:
    """Each image's run and the facts it ran with, in order; the first failure is a 500
    naming the image. ``per_image``: each image's own input values, where the run has any."""
    loop = asyncio.get_running_loop()
    states = [
        FrameState(inputs=dict(per_image[n]) if per_image else {}) for n in range(len(images))
    ]
    done: list[tuple[FrameRun, FrameFacts]] = []
    if workflow.collapses_frames and len(images) > 1:  # the images as one run
        facts = [FrameFacts(HTTP_STREAM, n, datetime.now(UTC)) for n in range(len(images))]
        together = await loop.run_in_executor(
            state.executor, run_frames, workflow, list(images), facts, states
        )
        done = list(zip(together, facts, strict=True))
    else:
        for number, (image, frame_state) in enumerate(zip(images, states, strict=True)):
            facts_of = FrameFacts(HTTP_STREAM, number, datetime.now(UTC))
            run = await loop.run_in_executor(
                state.executor, run_frame, workflow, image, facts_of, frame_state
            )
            done.append((run, facts_of))
            if run.error is not None:
                break  # the run is over: the images after it would be wasted
    for number, (run, _) in enumerate(done):
        if run.error is not None:
            where = f"image {number}: " if len(images) > 1 else ""
            # Over a bound the caller wrote (the frame's size made it so): theirs, a 400.
            failure = BoundExceeded if isinstance(run.error, BoundExceeded) else WorkflowRunError
            raise failure(f"the workflow failed on {where}{run.error}")
    return done
