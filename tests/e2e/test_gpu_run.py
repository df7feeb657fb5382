"""The lent GPU machine's one command, ``bash benchmarks/gpu/run.sh``, run here with ``--smoke``
on a bundle built without downloads: every step at its smallest size, each GPU step saying
"no GPU" and moving on; the second call's step, the whole server, with one session on ONNX
Runtime. A GPU is lent to a session only now and then, with minutes to spend:
this keeps the run from rotting between lent sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
GPU_STEPS = ("graphs", "torch", "end_to_end", "backend", "batcher", "compile")


@pytest.mark.timeout(600)
def test_the_gpu_run_smokes_through_every_step_on_a_cpu(tmp_path, default_model_dir):
    bundle, out = tmp_path / "bundle", tmp_path / "out"
    built = subprocess.run(
        [sys.executable, "-m", "benchmarks", "gpu-bundle", "--out", str(bundle),
         "--models-dir", str(default_model_dir), "--no-wheels"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    ran = subprocess.run(
        ["bash", "benchmarks/gpu/run.sh", "--smoke"],
        cwd=ROOT, capture_output=True, text=True, timeout=400,
        env={**os.environ, "GPU_BUNDLE": str(bundle), "OUT": str(out),
             "GPU_SITE": str(tmp_path / "site"), "GPU_SERVER_BUNDLE": str(tmp_path / "none")},
    )  # fmt: skip
    said = ran.stdout[-4000:] + ran.stderr[-4000:]
    assert ran.returncode == 0, said
    steps = json.loads((out / "gpu-run.json").read_text())["steps"]
    assert set(steps) >= {"env", "parity", "ort_cpu", "decode", "server", *GPU_STEPS}, said
    failed = {name: step["error"] for name, step in steps.items() if "error" in step}
    assert not failed, failed
    for name in GPU_STEPS:
        assert steps[name].get("skipped") == "no GPU", (name, steps[name])
    assert steps["ort_cpu"]["batches"], steps["ort_cpu"]
    # The second call's step: the whole server, one session of ours, frames back.
    (served,) = steps["server"]["steps"]
    assert served["sessions"] == 1 and served["fps_per_session"]["min"] > 0, steps["server"]
    assert any('backend="onnxruntime"' in line for line in steps["server"]["model_loaded"])
    # The parity step runs on the CPU wherever PyTorch is: ONNX Runtime's top detections.
    if steps["parity"].get("photos"):
        for photo, found in steps["parity"]["photos"].items():
            assert found["fp32"]["max_score_diff"] < 1e-3, (photo, found)
