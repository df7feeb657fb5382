"""``visionstream deploy kuberay``: the RayService manifest (``kuberay.yaml``) filled in.
Text only: printing it needs neither Ray nor a cluster."""

from __future__ import annotations

from importlib import metadata, resources
from string import Template

__all__ = ["RAY_VERSION", "manifest"]

# What the ray extra pins (pyproject.toml); used when Ray is not installed here.
RAY_VERSION = "2.60.0"


def manifest(
    image: str,
    workers: int,
    replicas: str,
    max_replicas: int,
    gpu_share: float,
    port: int,
    evidence_size: str = "100Gi",
) -> str:
    try:
        ray_version = metadata.version("ray")
    except metadata.PackageNotFoundError:
        ray_version = RAY_VERSION
    template = Template(resources.files(__package__).joinpath("kuberay.yaml").read_text())
    return template.substitute(
        image=image,
        workers=workers,
        replicas=replicas,
        max_replicas=max_replicas,
        gpu_share=gpu_share,
        port=port,
        ray_version=ray_version,
        evidence_size=evidence_size,
    )
