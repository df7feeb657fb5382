"""``visionstream models add`` as a user runs it, into a models directory of the test's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.onnx_models import CLASS_LOGITS, POSE_ROWS, SEG_PROTOS, SEG_ROWS, constant_model

__all__ = ["add_model", "add_tiny_task_models"]


def add_model(models_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VISIONSTREAM_MODELS_DIR": str(models_dir)}
    return subprocess.run(
        [sys.executable, "-m", "streaming.cli", "models", "add", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def add_tiny_task_models(models_dir: Path, scratch: Path) -> None:
    """``tiny-seg``, ``tiny-pose``, ``tiny-cls`` and ``tiny-multi``: constant exports (the
    same answer for any image) of each task, added as a user adds theirs."""
    seg = constant_model(scratch / "tiny-seg.onnx",
                         [("output0", SEG_ROWS.T.copy()), ("output1", SEG_PROTOS)])  # fmt: skip
    pose = constant_model(scratch / "tiny-pose.onnx", [("output0", POSE_ROWS.T.copy())])
    cls = constant_model(scratch / "tiny-cls.onnx", [("output0", CLASS_LOGITS)])
    multi = constant_model(scratch / "tiny-multi.onnx", [("output0", CLASS_LOGITS)])
    for args in (
        [str(seg), "--decoder", "yolov8-seg", "--names", "cat,dog,bird"],
        [str(pose), "--decoder", "yolov8-pose", "--names", "animal",
         "--keypoints", "nose,tail", "--skeleton", "0-1"],
        [str(cls), "--decoder", "classification", "--names", "cat,dog,bird",
         "--resize", "stretch"],
        [str(multi), "--decoder", "classification", "--names", "cat,dog,bird",
         "--resize", "stretch", "--multi-label", "--logits", "sigmoid"],
    ):  # fmt: skip
        done = add_model(models_dir, *args)
        assert done.returncode == 0, done.stderr
