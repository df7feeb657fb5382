"""The images that flow through a workflow: the frame, and crops and slices cut from it
that know where they lie (the reference's parent and root metadata)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Origin", "WorkflowImage"]


@dataclass(frozen=True)
class Origin:
    """Where an image lies in another: its top-left corner there, and that image's size
    (the reference's ``parent_origin``)."""

    offset_x: int
    offset_y: int
    width: int
    height: int

    def to_json(self) -> dict[str, int]:
        return {
            "offset_x": self.offset_x,
            "offset_y": self.offset_y,
            "width": self.width,
            "height": self.height,
        }


class WorkflowImage:
    """An image flowing through a workflow: BGR uint8 pixels and where they came from. A
    crop (or slice) knows its parent (``parent_id``: the detection it was cut for) and the
    frame it ultimately came from (``root_id``), with its place in each.

    ``numpy`` may be given as a function that makes the pixels: a frame's are then made when
    a step first reads them, and never for a frame whose steps all skip it (motion gating)."""

    __slots__ = ("_load", "_pixels", "parent_id", "parent_origin", "root_id", "root_origin")

    def __init__(
        self,
        numpy: np.ndarray | Callable[[], np.ndarray],
        parent_id: str,
        parent_origin: Origin | None = None,
        root_id: str | None = None,
        root_origin: Origin | None = None,
    ) -> None:
        self._pixels: np.ndarray | None = None if callable(numpy) else numpy
        self._load: Callable[[], np.ndarray] | None = numpy if callable(numpy) else None
        self.parent_id = parent_id
        self.parent_origin = parent_origin
        """None: not a crop (the frame, or an image made from it pixel for pixel)."""
        self.root_id = root_id
        self.root_origin = root_origin

    @property
    def numpy(self) -> np.ndarray:
        """The pixels (made now if they were given as a function: a workflow runs on one
        thread, so once)."""
        if self._pixels is None:
            assert self._load is not None
            self._pixels, self._load = self._load(), None
        return self._pixels

    def __reduce__(self) -> tuple[type[WorkflowImage], tuple[object, ...]]:
        """Pickled with its pixels made (a function that makes them does not travel)."""
        return WorkflowImage, (
            self.numpy,
            self.parent_id,
            self.parent_origin,
            self.root_id,
            self.root_origin,
        )

    def __repr__(self) -> str:
        shape = "unread" if self._pixels is None else "x".join(map(str, self._pixels.shape))
        return f"WorkflowImage({self.parent_id!r}, {shape})"

    def crop(self, x1: int, y1: int, x2: int, y2: int, crop_id: str) -> WorkflowImage:
        """The pixels of ``[x1, x2) x [y1, y2)`` (clipped to the image) as a crop named
        ``crop_id``, with its place in this image and in the frame."""
        height, width = self.numpy.shape[:2]
        x1, x2 = max(0, min(x1, width)), max(0, min(x2, width))
        y1, y2 = max(0, min(y1, height)), max(0, min(y2, height))
        root = self.root_origin or Origin(0, 0, width, height)
        return WorkflowImage(
            self.numpy[y1:y2, x1:x2],
            crop_id,
            Origin(x1, y1, width, height),
            self.root_id or self.parent_id,
            Origin(root.offset_x + x1, root.offset_y + y1, root.width, root.height),
        )

    def derived(self, pixels: np.ndarray) -> WorkflowImage:
        """New pixels in this image's place (a blurred or annotated copy)."""
        return WorkflowImage(
            pixels, self.parent_id, self.parent_origin, self.root_id, self.root_origin
        )
