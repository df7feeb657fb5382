"""The HTTP service: FastAPI app factory and routers."""

from .app import create_app

__all__ = ["create_app"]
