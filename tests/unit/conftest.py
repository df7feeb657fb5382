"""Unit tests run in isolation from the machine: no ``STREAMING_*`` or ``VISIONSTREAM_*``
variable reaches them, and their home is an empty directory, so a test that builds
``Settings()`` and reaches for the user's cache finds nothing there. What they need (the
default model, settings) fixtures hand them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming.config import Settings


@pytest.fixture(scope="package", autouse=True)
def _isolated(tmp_path_factory) -> Iterator[None]:
    """For the whole package (its module-scoped fixtures too); undone before the e2e tests."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith(("STREAMING_", "VISIONSTREAM_")):
                patch.delenv(name)
        patch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        yield


@pytest.fixture
def make_settings(default_model_dir: Path, tmp_path: Path) -> Callable[..., Settings]:
    """``Settings`` with the suite's default model and this test's own directories;
    keyword arguments override any field."""

    def make(**overrides: Any) -> Settings:
        fields: dict[str, Any] = {
            "models_dir": default_model_dir,
            "data_dir": tmp_path / "data",
            "sink_dir": tmp_path / "sinks",
            "trt_cache_dir": tmp_path / "trt",
            **overrides,
        }
        return Settings(**fields)

    return make
