"""What a live VLM step costs each frame between its questions: the frame's run with the
step holding its last answer (``VISIONSTREAM_VLM_LIVE_MIN_INTERVAL_S`` far away), in this
process, for one ``openai_compatible`` step on 1280x720 frames; the provider (the suite's,
on loopback) answers at once. ``--tree`` runs an earlier checkout's code (a ``git worktree``)
for an A/B in one run: ``python -m benchmarks vlm-held --tree /tmp/before``.

Results: ``results/vlm-held.json`` (the p50 and p95 of ``--frames`` frames, per checkout
and round, alternated)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import percentiles, write_result

ROOT = Path(__file__).resolve().parents[1]


def measure(frames: int) -> dict[str, Any]:
    """The per-frame run time, in ms, of the held step's workflow (in this interpreter)."""
    import numpy as np
    import supervision as sv

    from streaming.config import Settings
    from streaming.inference.registry import ModelRegistry
    from streaming.settings.language import VlmSettings
    from streaming.workflows import compile_workflow, parse_spec
    from streaming.workflows.blocks.base import BuildContext, FrameState
    from tests.support.vlm_provider import VlmProvider

    spec = {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "url"},
        ],
        "steps": [
            {
                "type": "roboflow_core/openai_compatible@v1",
                "name": "vlm",
                "base_url": "$inputs.url",
                "model_name": "describe",
                "prompt": "What is here? {{ $parameters.picture }}",
                "prompt_parameters": {"picture": "$inputs.image"},
            }
        ],
        "outputs": [{"type": "JsonField", "name": "vlm", "selector": "$steps.vlm.output"}],
    }
    image = np.random.default_rng(0).integers(0, 255, (720, 1280, 3), dtype=np.uint8)
    with VlmProvider(lambda _image: sv.Detections.empty()) as provider:
        settings = Settings(
            allowed_networks="127.0.0.1/32", vlm=VlmSettings(live_min_interval_s=3600)
        )
        registry = ModelRegistry(settings)
        context = BuildContext(registry, settings=settings, live=True)
        workflow = compile_workflow(
            parse_spec(spec), context, parameters={"url": provider.openai_url}
        )
        try:
            deadline = time.monotonic() + 60
            while not workflow.run(image, {}, FrameState())["vlm"]:  # the first answer
                assert time.monotonic() < deadline, "no answer in 60 s"
                time.sleep(0.01)
            took = []
            for _ in range(frames):
                started = time.perf_counter()
                workflow.run(image, {}, FrameState())
                took.append((time.perf_counter() - started) * 1000)
        finally:
            workflow.close()
            registry.close()
    return percentiles(took, (50, 95), 3)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="benchmarks vlm-held", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", type=Path, help="an earlier checkout to compare with")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # a child: this interpreter's sys.path says which checkout runs
        print(json.dumps(measure(args.frames)))
        return
    trees = {"this": ROOT, **({"before": args.tree.resolve()} if args.tree else {})}
    rounds = []
    for number in range(args.rounds):
        for name in trees if number % 2 == 0 else reversed(list(trees)):
            code = (  # the checkout's packages first; this file run as it is
                f"import runpy, sys; sys.path.insert(0, {str(trees[name])!r}); "
                f"sys.argv = ['vlm-held', '--one', '--frames', '{args.frames}']; "
                f"runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')"
            )
            out = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            )
            row = {
                "round": number + 1,
                "checkout": name,
                **json.loads(out.stdout.strip().splitlines()[-1]),
            }
            rounds.append(row)
            print(json.dumps(row), flush=True)
    print(write_result("vlm-held", {"frames": args.frames, "rounds": rounds}))


if __name__ == "__main__":
    main()
