"""Model registry: each model is loaded once per process and shared by every session."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from ..config import Settings
from ..errors import ModelError
from .manifest import MANIFEST_FILE
from .model import DetectionModel
from .session import OnnxRuntimeSession, default_onnx_providers

__all__ = ["ModelRegistry", "UnknownModel"]

log = logging.getLogger(__name__)


class UnknownModel(KeyError):
    """No manifest in the models directory has this name."""


class ModelRegistry:
    def __init__(self, settings: Settings) -> None:
        self._dir = Path(settings.models_dir)
        self._providers = settings.onnx_providers or default_onnx_providers()
        self._threads = settings.onnx_intra_op_threads
        self._models: dict[str, DetectionModel] = {}
        self._lock = threading.Lock()

    def available(self) -> list[str]:
        if not self._dir.is_dir():
            return []
        return sorted(p.parent.name for p in self._dir.glob(f"*/{MANIFEST_FILE}"))

    def loaded(self) -> dict[str, DetectionModel]:
        return dict(self._models)

    def get(self, model_id: str) -> DetectionModel:
        """Load on first use (blocking: call it off the event loop)."""
        model = self._models.get(model_id)
        if model is not None:
            return model
        with self._lock:
            model = self._models.get(model_id)
            if model is not None:
                return model
            directory = self._dir / model_id
            if "/" in model_id or not (directory / MANIFEST_FILE).is_file():
                raise UnknownModel(model_id)
            try:
                model = DetectionModel.from_directory(
                    directory,
                    OnnxRuntimeSession,
                    providers=self._providers,
                    intra_op_threads=self._threads,
                )
                model.warm_up()
            except Exception as exc:
                raise ModelError(f"model '{model_id}' failed to load: {exc}") from exc
            log.info("loaded model %s on %s", model_id, model.session.providers)
            self._models[model_id] = model
            return model

    def close(self) -> None:
        with self._lock:
            for model in self._models.values():
                model.session.close()
            self._models.clear()
