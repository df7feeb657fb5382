"""Workflow blocks by type id; ``get_block`` raises on unknown names.

A block is registered by its module: every class a module of ``MODULES`` exports (its
``__all__``) that declares its own ``type_ids``. A new block in a module here needs nothing
more; a new module, one line in ``MODULES``."""

from __future__ import annotations

import importlib

from .base import Block

__all__ = ["BLOCKS", "MODULES", "Block", "get_block"]

MODULES = (
    "detection",
    "classification",
    "visualization",
    "model_visualization",
    "zone_visualization",
    "transforms",
    "tracking",
    "analytics",
    "filtering",
    "flow",
    "aggregation",
    "motion",
    "sinks",
    "crops",
    "fusion",
    "slicing",
    "geometry",
    "formatters",
    "files",
    "image_ops",
    "secrets",
    "ocr",
    "text_stitching",
    "email",
    "change",
    "focus",
    "features",
    "consensus",
    "rollup",
    "dynamic_zone",
    "perspective",
    "slack",
    "language",
    "vlm_formatters",
    "cloud_vlms",
    "stacks",
    "local_vlms",
    "lmm",
)


def _registered() -> dict[str, type[Block]]:
    blocks: dict[str, type[Block]] = {}
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        for exported in module.__all__:
            cls = getattr(module, exported)
            if not (isinstance(cls, type) and issubclass(cls, Block) and "type_ids" in vars(cls)):
                continue
            for type_id in cls.type_ids:
                if blocks.setdefault(type_id, cls) is not cls:
                    raise TypeError(
                        f"{type_id} is both {blocks[type_id].__name__} and {cls.__name__}"
                    )
    return blocks


BLOCKS: dict[str, type[Block]] = _registered()


def get_block(type_id: str) -> type[Block] | None:
    return BLOCKS.get(type_id)
