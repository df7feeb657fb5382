"""A loaded detection model: manifest + inference session + decoder, shared by all sessions."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import supervision as sv

from .decoders import DecodeOptions, get_decoder
from .manifest import ModelManifest
from .preprocess import letterbox
from .session import InferenceSession

__all__ = ["DetectionModel", "StageTimer"]

StageTimer = dict[str, float]
"""Milliseconds per stage name, accumulated over one frame."""


class DetectionModel:
    def __init__(self, manifest: ModelManifest, session: InferenceSession) -> None:
        self.manifest = manifest
        self.session = session
        self._decoder = get_decoder(manifest.decoder)
        self._class_names = np.array(manifest.class_names)

    @property
    def name(self) -> str:
        return self.manifest.name

    def detect(
        self, image: np.ndarray, options: DecodeOptions, timer: StageTimer | None = None
    ) -> sv.Detections:
        """BGR uint8 image -> detections in image pixels, with ``class_name`` data."""
        m = self.manifest
        t0 = time.perf_counter()
        blob, box = letterbox(
            image,
            m.input_width,
            m.input_height,
            fill=m.letterbox_fill,
            scale=m.scale,
            swap_rb=m.channel_order == "RGB",
        )
        t1 = time.perf_counter()
        output = self.session.run(blob)[0]
        t2 = time.perf_counter()
        detections = self._decoder.decode(output, options)
        if len(detections):
            h, w = image.shape[:2]
            xyxy = box.to_image(detections.xyxy)
            xyxy[:, [0, 2]] = xyxy[:, [0, 2]].clip(0, w)
            xyxy[:, [1, 3]] = xyxy[:, [1, 3]].clip(0, h)
            detections.xyxy = xyxy
        detections.data["class_name"] = (
            self._class_names[detections.class_id.astype(int)]
            if len(detections)
            else np.array([], dtype=str)
        )
        t3 = time.perf_counter()
        if timer is not None:
            timer["preprocess"] = timer.get("preprocess", 0.0) + (t1 - t0) * 1000
            timer["inference"] = timer.get("inference", 0.0) + (t2 - t1) * 1000
            timer["postprocess"] = timer.get("postprocess", 0.0) + (t3 - t2) * 1000
        return detections

    def warm_up(self, runs: int = 3) -> None:
        image = np.full((self.manifest.input_height, self.manifest.input_width, 3), 114, np.uint8)
        for _ in range(runs):
            self.detect(image, DecodeOptions())

    @classmethod
    def from_directory(
        cls, directory: Path, session_factory: type[InferenceSession] | None = None, **kwargs
    ) -> DetectionModel:
        from .session import OnnxRuntimeSession

        manifest = ModelManifest.load(directory)
        factory = session_factory or OnnxRuntimeSession
        return cls(manifest, factory(manifest.onnx_path(directory), **kwargs))
