"""``visionstream deploy kuberay``: a RayService whose Serve config names a real builder and
whose environment is settings the replicas accept."""

from __future__ import annotations

import importlib
import subprocess
import sys

import yaml
from ray.serve import Application

from streaming.config import Settings


def test_the_printed_rayservice_builds_our_app_with_settings_replicas_accept(monkeypatch):
    printed = subprocess.run(
        [sys.executable, "-m", "streaming.cli", "deploy", "kuberay", "--image", "reg/vs:1",
         "--workers", "3", "--replicas", "6"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    claim, service = yaml.safe_load_all(printed)
    assert claim["kind"] == "PersistentVolumeClaim"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # every pod writes evidence
    assert service["kind"] == "RayService"
    cluster = service["spec"]["rayClusterConfig"]
    (workers,) = cluster["workerGroupSpecs"]
    assert workers["replicas"] == 3
    pod = workers["template"]["spec"]
    assert pod["hostNetwork"] is True  # ICE candidates on node addresses
    (container,) = pod["containers"]
    assert container["image"] == "reg/vs:1"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1

    (app,) = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"]
    module, _, name = app["import_path"].partition(":")
    assert app["args"] == {"replicas": "6"}
    for variable in container["env"]:
        if "value" in variable:  # the events URL comes from a Secret
            monkeypatch.setenv(variable["name"], str(variable["value"]))
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert {v["name"] for v in pod["volumes"]} == set(mounts)
    assert next(v for v in container["env"] if v["name"] == "VISIONSTREAM_EVENTS_URL")["valueFrom"]
    settings = Settings()
    assert str(settings.sink_dir) == mounts["evidence"]
    assert settings.ray_replica_resources == {"CPU": 1, "GPU": 0.0625}
    built = getattr(importlib.import_module(module), name)(app["args"])
    assert isinstance(built, Application)
