"""What one workflow may cost (``VISIONSTREAM_LIMIT_*``): a workflow is untrusted input, so
every size a caller controls (steps, pixels, elements, bytes written) has a bound here, read
by the compiler where the size is literal and by the block on each frame where it is not."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from .errors import InvalidRequest, WorkflowCompilationError
from .settings.prefix import ProductSettings

__all__ = ["BoundExceeded", "WorkflowLimits"]


class BoundExceeded(InvalidRequest):
    """A step would exceed one of the server's ``VISIONSTREAM_LIMIT_*`` bounds on a frame."""

    code = "limit_exceeded"


class WorkflowLimits(ProductSettings):
    """Bounds on what one workflow may make (``VISIONSTREAM_LIMIT_*``)."""

    model_config = SettingsConfigDict(env_prefix="VISIONSTREAM_LIMIT_", extra="ignore")

    workflow_steps: int = Field(default=500, ge=1)
    """Steps of one workflow once its inner workflows are inlined."""
    workflow_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """Text copied into a workflow as its inner workflows are inlined (bound values copied
    into every place that names them)."""
    image_pixels: int = Field(default=4096 * 4096, ge=64 * 64)
    """Pixels of any one image a step makes (a resize, a warp, a rotation, a stack, a
    mosaic): 16.8 MP, twice a 4K frame."""
    elements: int = Field(default=1024, ge=1)
    """Elements one step makes of one image on a frame (slices, crops)."""
    kernel_size: int = Field(default=255, ge=3)
    """A blur's, a morphology's or a heat map's kernel side, at most (its time per pixel
    grows with it; a 30000 one is 900 MB before it starts)."""
    text_chars: int = Field(default=1_000_000, ge=1000)
    """Characters of one text a step makes (a ``string_template``'s rendering, a format
    spec's width); past it the frame is a 400."""
    file_sink_mb: int = Field(default=1024, ge=1)
    """What ``local_file_sink`` steps may keep under ``VISIONSTREAM_FILE_SINK_DIR`` in all;
    past it a write is refused (an error on that step), nothing is deleted."""
    file_sink_min_free_mb: int = Field(default=1024, ge=0)
    """Free space a ``local_file_sink`` write leaves on its disk, at least."""

    def check_pixels(self, step: str, width: int, height: int, *, compiling: bool = False) -> None:
        """A 400 when a ``width`` x ``height`` image is over ``image_pixels``: the
        compiler's (``compiling``: the size is written in the step) or the frame's."""
        if width * height > self.image_pixels:
            error = WorkflowCompilationError if compiling else BoundExceeded
            raise error(
                f"step '{step}': a {width}x{height} image is over the server's "
                f"{self.image_pixels} pixels (VISIONSTREAM_LIMIT_IMAGE_PIXELS)"
            )

    def check_kernel(self, step: str, field: str, size: int) -> None:
        """A compile-time 400 when a kernel's side is over ``kernel_size``."""
        if size > self.kernel_size:
            raise WorkflowCompilationError(
                f"step '{step}': {field} {size} is over the server's {self.kernel_size} "
                "(VISIONSTREAM_LIMIT_KERNEL_SIZE)"
            )

    def check_elements(self, step: str, count: int, what: str) -> None:
        """A 400 when a step would make ``count`` ``what`` of one image on a frame."""
        if count > self.elements:
            raise BoundExceeded(
                f"step '{step}': {count} {what} of one image is over the server's "
                f"{self.elements} (VISIONSTREAM_LIMIT_ELEMENTS)"
            )
