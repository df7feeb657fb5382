"""Every code example in the README and the guide, run as written against a real server: the
Python ones as programs of their own, the shell ones marked ``run`` with bash, the JSON ones
parsed (tests/support/examples.py reads them). An example that stops working fails here.

Each runs in a folder holding the files the examples name (``clip.mp4``, ``photo.jpg``,
``street.jpg``, ``car.jpg``, ``my-workflow.json``, made from Debian's darknet photos), with
the server's address and two RTSP cameras of the test put where the examples say
``127.0.0.1:9001`` and ``127.0.0.1:8554``. ``$ID`` in a shell example is a pipeline of the
test's, running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import httpx
import numpy as np
import pytest

from streaming.workflows.library import object_detection
from tests.conftest import load_photo
from tests.support.camera import RTSPCamera
from tests.support.examples import Example, examples
from tests.support.media import write_clip
from tests.support.server import running_server

EXAMPLES = examples()
RUN_TIMEOUT_S = 180
# The examples' own processes open WebRTC peers; in the tests' loopback-only namespace their
# ICE candidates must be on loopback, as the suite's own are (tests/conftest.py).
SITE = (
    "from streaming.rtc.ice import restrict_host_addresses\n"
    "restrict_host_addresses(['127.0.0.1'])\n"
)


@pytest.fixture(scope="module")
def example_server():
    with running_server(allow_local_sources="true") as server:
        yield server


@pytest.fixture(scope="module")
def cameras():
    with RTSPCamera(path="a") as first, RTSPCamera(path="b") as second:
        yield [first.url, second.url]


def with_plate(image: np.ndarray) -> np.ndarray:
    """``image`` (dog.jpg at 640x480) with a number plate on the car behind the bicycle: a
    box the default detector still finds as a car, with text PP-OCRv4 reads."""
    plated = image.copy()
    x, y, width, height = 470, 108, 64, 18
    cv2.rectangle(plated, (x, y), (x + width, y + height), (255, 255, 255), -1)
    cv2.putText(plated, "VS 2026", (x + 3, y + height - 4), cv2.FONT_HERSHEY_SIMPLEX, 0.45, 0, 1)
    return plated


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, photos) -> Path:
    folder = tmp_path_factory.mktemp("examples")
    dog = load_photo(photos, "dog.jpg")
    cv2.imwrite(str(folder / "photo.jpg"), dog)
    cv2.imwrite(str(folder / "street.jpg"), load_photo(photos, "person.jpg"))
    cv2.imwrite(str(folder / "car.jpg"), with_plate(dog))
    panned = (np.roll(dog, 4 * i, axis=1) for i in range(45))  # a dog, a bicycle, a truck
    write_clip(folder / "clip.mp4", panned, fps=15)
    (folder / "my-workflow.json").write_text(json.dumps(object_detection()))
    (folder / "site").mkdir()
    (folder / "site" / "sitecustomize.py").write_text(SITE)
    return folder


@pytest.fixture(scope="module")
def pipeline_id(example_server, cameras):
    started = httpx.post(
        f"{example_server.url}/inference_pipelines/initialise",
        json={"video_configuration": {"type": "VideoConfiguration",
                                      "video_reference": [cameras[0]], "max_fps": 5},
              "processing_configuration": {"type": "WorkflowConfiguration",
                                           "workflow_specification": object_detection()}},
        timeout=60,
    )  # fmt: skip
    started.raise_for_status()
    pipeline = started.json()["context"]["pipeline_id"]
    yield pipeline
    httpx.post(f"{example_server.url}/inference_pipelines/{pipeline}/terminate", timeout=60)


def test_every_example_is_run_or_says_why_not() -> None:
    unsaid = [e.name for e in EXAMPLES if e.lang not in ("json", "python") and not e.mark]
    assert not unsaid, f"say <!-- example: run --> or <!-- example: not run: WHY -->: {unsaid}"
    no_reason = [e.name for e in EXAMPLES if e.mark and e.mark.rstrip(": ") == "not run"]
    assert not no_reason, f"an example not run says why: {no_reason}"
    assert any(e.runs for e in EXAMPLES if e.page.name == "README.md")


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.lang == "json"], ids=lambda e: e.name)
def test_json_example_parses(example: Example) -> None:
    assert isinstance(example.json_value(), dict | list)


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.runs], ids=lambda e: e.name)
def test_example_runs(example: Example, example_server, cameras, workdir, request) -> None:
    code = example.localised(example_server.url, cameras)
    env = {**os.environ, "PYTHONPATH": str(workdir / "site"), "PYTHONUNBUFFERED": "1",
           "VISIONSTREAM_API_URL": example_server.url}  # fmt: skip
    if example.lang == "python":
        command = [sys.executable, "-c", code]
    else:
        if "$ID" in code:
            env["ID"] = request.getfixturevalue("pipeline_id")
        command = ["bash", "-euo", "pipefail", "-c", code]
    done = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )
    said = f"{example.name} ended {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, said
    assert "Traceback" not in done.stderr, said
    if example.lang == "python":
        assert done.stdout.strip(), f"{example.name} printed nothing: {said}"
