"""Settings' resource maps (``{"CPU": 1, "GPU": 0.25, "cameras": 1}``) as Ray actor options."""

from __future__ import annotations

from typing import Any

__all__ = ["actor_resources"]


def actor_resources(resources: dict[str, float]) -> dict[str, Any]:
    """``num_cpus``, ``num_gpus`` and custom ``resources``; CPU defaults to 1, GPU to 0.
    A replica or pipeline that runs a model on the GPU needs a GPU share: Ray hides the GPUs
    from actors that reserve none."""
    custom = dict(resources)
    return {
        "num_cpus": custom.pop("CPU", 1.0),
        "num_gpus": custom.pop("GPU", 0.0),
        "resources": custom,
    }
