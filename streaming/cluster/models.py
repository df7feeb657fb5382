"""One Ray Serve deployment per model, batching frames from every media replica
(``VISIONSTREAM_RAY_MODELS=deployment``), instead of a model loaded in each replica.

The deployment opens the model with the embedded server's own backends (ONNX Runtime with
TensorRT/CUDA, OpenVINO) and batches calls with ``@serve.batch``: the first waiting call,
then others until the batch is full or ``VISIONSTREAM_MAX_QUEUE_DELAY_MS`` has passed (our
batcher's, and Triton's, semantics). A replica's model runs through ``ServeModelSession``, an
``InferenceSession`` whose ``run`` is a call to the deployment: the preprocessed tensor
(2 MB for 416x416) travels through Ray's object store, which on the same node is shared
memory. Preprocessing and decoding stay in the replica, as for the remote V2 backend.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import numpy as np
from ray import serve

from ..config import Settings
from ..inference.backends import GPU_BATCH, open_session
from ..inference.default_model import DEFAULT_MODEL_ID, ensure_default_model
from ..inference.manifest import ModelManifest
from ..inference.session import InferenceSession, TensorSpec
from .names import APP_NAME
from .resources import actor_resources

__all__ = [
    "ServeModelSession",
    "deployed_models",
    "deployment_name",
    "model_deployment",
    "session_opener",
]

log = logging.getLogger(__name__)


def deployment_name(model_id: str) -> str:
    return f"model-{model_id}"


@serve.deployment
class ModelDeployment:
    """One model, shared by every replica; calls batched across them."""

    def __init__(self, settings: Settings, model_id: str) -> None:
        models_dir = Path(settings.models_dir)
        if model_id == DEFAULT_MODEL_ID and settings.prepare_default_model:
            ensure_default_model(models_dir, log.info)
        directory = models_dir / model_id
        self._session = open_session(ModelManifest.load(directory), directory, settings)
        batch = settings.max_batch_size or (GPU_BATCH if self._session.on_accelerator else 8)
        self.infer.set_max_batch_size(batch)  # type: ignore[attr-defined]  # serve.batch's
        self.infer.set_batch_wait_timeout_s(settings.max_queue_delay_ms / 1000)  # type: ignore[attr-defined]
        log.info("model %s served on %s, batches up to %d", model_id, self._session.device, batch)

    def describe(self) -> dict[str, Any]:
        session = self._session
        return {
            "backend": session.backend,
            "providers": session.providers,
            "device": session.device,
            "on_accelerator": session.on_accelerator,
            "degraded": session.degraded,
            "inputs": session.inputs,
            "outputs": session.outputs,
        }

    @serve.batch(max_batch_size=GPU_BATCH, batch_wait_timeout_s=0.002)
    async def infer(self, batches: list[np.ndarray]) -> list[list[np.ndarray]]:
        """Each caller's batch (usually one frame), run as one; each gets its own rows."""
        joined = np.concatenate(batches) if len(batches) > 1 else batches[0]
        outputs = await asyncio.to_thread(self._session.run, joined)
        bounds = np.cumsum([len(b) for b in batches])[:-1]
        per_output = [np.split(output, bounds) for output in outputs]
        return [list(rows) for rows in zip(*per_output, strict=True)]


def model_deployment(settings: Settings, model_id: str) -> Any:
    """The bound deployment for ``model_id`` (one replica, ``VISIONSTREAM_RAY_MODEL_RESOURCES``)."""
    return ModelDeployment.options(  # type: ignore[attr-defined]
        name=deployment_name(model_id),
        num_replicas=1,
        # Replicas' threads wait on their calls; the batcher wants many in flight.
        max_ongoing_requests=256,
        ray_actor_options=actor_resources(settings.ray_model_resources),
    ).bind(settings, model_id)


class ServeModelSession(InferenceSession):
    """A model deployment as a replica's session: ``run`` calls it (from a worker thread,
    never the event loop: a handle's ``result`` blocks)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        described = handle.describe.remote().result()
        self.backend = f"ray-serve/{described['backend']}"
        self.degraded = described["degraded"]
        self.inputs: list[TensorSpec] = described["inputs"]
        self.outputs: list[TensorSpec] = described["outputs"]
        self._providers: list[str] = described["providers"]
        self._device: str = described["device"]
        self._on_accelerator: bool = described["on_accelerator"]

    @property
    def providers(self) -> list[str]:
        return self._providers

    @property
    def device(self) -> str:
        return f"{self._device} (Ray Serve model deployment)"

    @property
    def on_accelerator(self) -> bool:
        return self._on_accelerator

    def run(self, batch: np.ndarray) -> list[np.ndarray]:
        return list(self._handle.infer.remote(batch).result())


def deployed_models(settings: Settings) -> set[str]:
    """The models that run as deployments (``VISIONSTREAM_RAY_MODELS=deployment``)."""
    return {settings.default_model} if settings.ray_models == "deployment" else set()


def session_opener(deployed: set[str]) -> Any:
    """``open_session`` for a replica or a pipeline actor: models in ``deployed`` through
    their deployment, any other loaded in the process."""

    def open_model(
        manifest: ModelManifest, directory: Path, settings: Settings
    ) -> InferenceSession:
        # A model of several networks (OCR) runs in the process: a deployment serves one.
        if directory.name not in deployed or manifest.parts:
            return open_session(manifest, directory, settings)
        handle = serve.get_deployment_handle(deployment_name(directory.name), app_name=APP_NAME)
        return ServeModelSession(handle)

    return open_model
