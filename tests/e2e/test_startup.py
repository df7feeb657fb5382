"""What a newcomer sees when the server starts: one line saying where to go, no other
library's chatter, and, when the model cannot be fetched, one line saying what to run."""

from __future__ import annotations

import base64
import shutil

import cv2
import httpx
import numpy as np

from tests.support.server import ServerProcess, running_server


def test_a_start_says_where_to_go_once_and_nothing_else_at_info():
    environment = {
        "VISIONSTREAM_MODELS_DIRR": "/nowhere",
        "STREAMING_API_KEY": "0ld-key",  # the old prefix: read, and named once
        "VISIONSTREAM_API_URL": "http://127.0.0.1:1",  # the client's: said so
    }
    with running_server(environment=environment) as server:
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        server.wait_for_output(f"ready: {server.url} (yolov3-tiny-416 on ")
        listed = f"{server.url}/inference_pipelines/list"
        assert httpx.get(listed, timeout=10).status_code == 401
        keyed = httpx.get(listed, headers={"Authorization": "Bearer 0ld-key"}, timeout=10)
        assert keyed.status_code == 200
    lines = list(server.lines)
    old = [line for line in lines if "STREAMING_API_KEY" in line]
    assert len(old) == 1 and "deprecated and still read" in old[0], old
    assert "0ld-key" not in "\n".join(lines)
    assert any("VISIONSTREAM_API_URL is a client setting" in line for line in lines), lines
    assert sum("ready: " in line for line in lines) == 1, lines
    noise = [line for line in lines if "alembic" in line or "factory" in line]
    assert not noise, noise
    # uvicorn's own start lines say less than "ready:", which comes once it listens too.
    assert not [line for line in lines if line.startswith("INFO:  ")], lines
    assert not [line for line in lines if "GET /healthz" in line]  # the access log is off
    typo = next(line for line in lines if "VISIONSTREAM_MODELS_DIRR" in line)
    assert "is not a setting" in typo and "did you mean 'VISIONSTREAM_MODELS_DIR'" in typo


JPEG = cv2.imencode(".jpg", np.zeros((48, 64, 3), np.uint8))[1].tobytes()


def test_a_model_that_cannot_be_fetched_is_one_line_saying_what_to_run(tmp_path, default_model_dir):
    """The tests' namespace has no network: pip cannot reach the index, as offline. The
    server says it is not ready and what it waits for, and is ready once the model is put
    where it looks."""
    models = tmp_path / "models"
    server = ServerProcess(models_dir=str(models), model_recheck_s="0.5")
    try:
        found = server.wait_for_output("default model unavailable", timeout=120)
        line = server.lines[found]
        assert "no network" in line and "visionstream models pull" in line, line
        assert "visionstream models add FILE" in line and "VISIONSTREAM_DEFAULT_MODEL" in line
        answer = httpx.get(f"{server.url}/readyz", timeout=10)
        assert answer.status_code == 503 and answer.json()["message"] in line
        # Asked for by name, the default model is not one to add: the same line, a 503.
        image = {"type": "base64", "value": base64.b64encode(JPEG).decode()}
        inferred = httpx.post(f"{server.url}/infer/object_detection", timeout=30,
                              json={"model_id": "yolov3-tiny-416", "image": image})  # fmt: skip
        assert inferred.status_code == 503 and "visionstream models pull" in inferred.text
        assert "models add FILE --name yolov3-tiny-416" not in inferred.text
        assert not [x for x in server.lines if x.startswith(("WARNING: Retrying", "ERROR: "))]
        waiting = server.lines[server.wait_for_output("not ready: ")]
        assert f"until yolov3-tiny-416 loads; it looks for it in {models}" in waiting
        assert not [x for x in server.lines if "pipelines not restarted" in x]  # none stored
        # Copied in, as a machine without a network gets it: ready, without a restart.
        shutil.copytree(default_model_dir / "yolov3-tiny-416", models / "copying")
        (models / "copying").rename(models / "yolov3-tiny-416")  # whole, or not there
        server.wait_for_output(f"ready: {server.url} (yolov3-tiny-416 on ", timeout=120)
        assert httpx.get(f"{server.url}/readyz", timeout=10).status_code == 200
    finally:
        server.stop()
