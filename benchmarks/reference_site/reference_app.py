"""The reference server (PyPI ``inference`` 1.8.3) as its own package builds it, run with the
reference virtualenv's Python: ``reference_app.py PORT``. benchmarks/reference.py sets the
environment (offline, WebRTC worker on, no telemetry) and the working directory."""

import sys

import uvicorn
from inference.core.env import MAX_ACTIVE_MODELS
from inference.core.interfaces.http.http_api import HttpInterface
from inference.core.managers.base import ModelManager
from inference.core.managers.decorators.fixed_size_cache import WithFixedSizeCache
from inference.core.registries.roboflow import RoboflowModelRegistry
from inference.models.utils import ROBOFLOW_MODEL_TYPES

if __name__ == "__main__":
    registry = RoboflowModelRegistry(ROBOFLOW_MODEL_TYPES)
    manager = WithFixedSizeCache(ModelManager(model_registry=registry), max_size=MAX_ACTIVE_MODELS)
    manager.init_pingback()
    app = HttpInterface(manager).app
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]))
