"""Workflow blocks by type id; ``get_block`` raises on unknown names."""

from __future__ import annotations

from .base import Block
from .detection import ObjectDetectionModelBlock
from .transforms import ImageBlurBlock
from .visualization import BoundingBoxVisualizationBlock, LabelVisualizationBlock

__all__ = ["BLOCKS", "Block", "get_block"]

BLOCKS: dict[str, type[Block]] = {
    type_id: cls
    for cls in (
        ObjectDetectionModelBlock,
        BoundingBoxVisualizationBlock,
        LabelVisualizationBlock,
        ImageBlurBlock,
    )
    for type_id in cls.type_ids
}


def get_block(type_id: str) -> type[Block] | None:
    return BLOCKS.get(type_id)
