"""A model served elsewhere over the KServe V2 / Open Inference Protocol (Triton, KServe, or
another visionstream), through ``tritonclient`` (HTTP with binary tensors, or gRPC).

This is the scale-out path: many visionstream workers (WebRTC, decode, pre/post-processing)
share a fleet of GPU inference servers. Same interface, same batching as a local session.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import numpy as np

from ..errors import ModelError
from .session import V2_TO_NUMPY, InferenceSession, TensorSpec

if TYPE_CHECKING:
    from ..config import Settings
    from .manifest import ModelManifest

__all__ = ["RemoteV2Session", "opened"]


class RemoteV2Session(InferenceSession):
    """One model served by a KServe V2 / Triton server, over HTTP or gRPC."""

    backend = "remote"

    def __init__(
        self,
        url: str,
        model_name: str,
        model_version: str = "",
        timeout: float = 30.0,
        api_key: str | None = None,
    ) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https", "grpc") or not parts.netloc:
            raise ModelError(
                f"remote model URL must be http(s):// or grpc://host:port, not {url!r}"
            )
        self._grpc = parts.scheme == "grpc"
        self._ssl = parts.scheme == "https"
        self._address = parts.netloc
        self._url = f"{parts.scheme}://{parts.netloc}"
        self._model = model_name
        self._version = model_version
        self._timeout = timeout
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._local = threading.local()  # tritonclient's clients are not shared across threads
        self._clients: list = []
        self._lock = threading.Lock()
        metadata = self._call(
            lambda c: c.get_model_metadata(
                model_name, model_version, headers=self._headers, **self._json_kw
            )
        )
        self.inputs = [self._spec(t) for t in metadata["inputs"]]
        self.outputs = [self._spec(t) for t in metadata["outputs"]]

    @property
    def _json_kw(self) -> dict:
        return {"as_json": True} if self._grpc else {}

    @staticmethod
    def _spec(tensor: dict) -> TensorSpec:
        return TensorSpec(
            tensor["name"], tensor["datatype"], tuple(int(d) for d in tensor["shape"])
        )

    def _client(self):
        client = getattr(self._local, "client", None)
        if client is None:
            if self._grpc:
                import tritonclient.grpc as triton

                client = triton.InferenceServerClient(self._address)
            else:
                import tritonclient.http as triton

                client = triton.InferenceServerClient(
                    self._address,
                    ssl=self._ssl,
                    connection_timeout=self._timeout,
                    network_timeout=self._timeout,
                )
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def _call(self, action, request_id: str | None = None):
        from tritonclient.utils import InferenceServerException

        where = f"remote model {self._model} at {self._url}"
        if request_id:
            where += f" (request {request_id})"
        try:
            return action(self._client())
        except InferenceServerException as exc:
            raise ModelError(f"{where}: {exc.message()}") from exc
        except OSError as exc:
            raise ModelError(f"{where}: {exc}") from exc

    @property
    def providers(self) -> list[str]:
        return [f"remote:{self._url}/{self._model}"]

    @property
    def device(self) -> str:
        return f"remote {self._url} ({'gRPC' if self._grpc else 'HTTP'})"

    @property
    def on_accelerator(self) -> bool:
        return True  # a fleet server: batching pays (fewer round trips)

    def run(self, batch: np.ndarray) -> list[np.ndarray]:
        if self._grpc:
            import tritonclient.grpc as triton
        else:
            import tritonclient.http as triton
        spec = self.inputs[0]
        dtype = V2_TO_NUMPY.get(spec.datatype, np.dtype(np.float32))
        data = np.ascontiguousarray(batch, dtype=dtype)
        tensor = triton.InferInput(spec.name, list(data.shape), spec.datatype)
        binary = {} if self._grpc else {"binary_data": True}
        tensor.set_data_from_numpy(data, **binary)
        wanted = [triton.InferRequestedOutput(o.name, **binary) for o in self.outputs]

        request_id = uuid.uuid4().hex  # names the call in both sides' errors and logs

        def infer(client):
            return client.infer(
                self._model,
                [tensor],
                model_version=self._version,
                outputs=wanted,
                request_id=request_id,
                headers=self._headers,
            )

        result = self._call(infer, request_id)
        return [result.as_numpy(o.name) for o in self.outputs]

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()


def opened(manifest: ModelManifest, directory: Path, settings: Settings) -> RemoteV2Session:
    """A ``remote`` model's session: its manifest's server, else ``VISIONSTREAM_REMOTE_*``."""
    remote = manifest.remote
    url = (remote.url if remote else None) or settings.remote_inference_url
    if not url:
        raise ModelError(
            f"model {manifest.name} is remote but names no server "
            "(manifest 'remote.url' or VISIONSTREAM_REMOTE_INFERENCE_URL)"
        )
    name = (remote.model_name if remote else None) or manifest.name
    key = settings.remote_inference_api_key
    return RemoteV2Session(
        url,
        name,
        remote.model_version if remote else "",
        api_key=key.get_secret_value() if key else None,
    )
