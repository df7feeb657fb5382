"""A loaded model: manifest + inference session + decoder, shared by all sessions. Detectors
(boxes, and masks or keypoints for segmentation and pose models) answer ``detect``;
classifiers answer ``classify``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import supervision as sv

from .batcher import BatchStats, DynamicBatcher
from .decoders import (
    ClassificationDecoder,
    DecodeOptions,
    Decoder,
    DetectionDecoder,
    get_decoder,
)
from .manifest import ModelManifest
from .overlaps import one_box_per_object
from .preprocess import Letterbox, Normalization, fitting_input, prepare
from .session import InferenceSession

__all__ = ["DetectionModel", "NetworkInput", "StageTimer"]

StageTimer = dict[str, float]
"""Milliseconds per stage name, accumulated over one frame."""

_NO_STATS = BatchStats(0, 0.0, 0.0)


@dataclass(frozen=True, eq=False)  # compared (and grouped) by identity
class NetworkInput:
    """One size the network runs at: the manifest as seen at that size, the batcher (and
    session) that runs it, and the decoder for its outputs."""

    manifest: ModelManifest
    batcher: DynamicBatcher
    decoder: Decoder
    canvas: bool = False
    """The session normalises on its device: it is handed resized uint8 frames."""

    @classmethod
    def of(cls, manifest: ModelManifest, batcher: DynamicBatcher) -> NetworkInput:
        decoder = get_decoder(manifest)
        decoder.check([o.shape for o in batcher.session.outputs])
        canvas = batcher.session.takes_canvases(Normalization.of(manifest))
        return cls(manifest, batcher, decoder, canvas)

    @property
    def size(self) -> tuple[int, int]:
        return self.manifest.input_width, self.manifest.input_height


class DetectionModel:
    """Preprocess -> the shared session (through the model's batcher) -> decode. A model
    with input variants (``ModelManifest.input_variants``) runs each image on the smallest
    network input that scales it as the main one would."""

    def __init__(
        self,
        manifest: ModelManifest,
        session: InferenceSession,
        batcher: DynamicBatcher | None = None,
        variants: Sequence[tuple[ModelManifest, DynamicBatcher]] = (),
    ) -> None:
        self.manifest = manifest
        self.session = session
        self.batcher = batcher or DynamicBatcher(session, name=manifest.name)
        self.inputs = [NetworkInput.of(manifest, self.batcher)]
        self.inputs += [NetworkInput.of(m, b) for m, b in variants]
        self._decoder = self.inputs[0].decoder
        self._class_names = np.array(manifest.class_names)
        self._keypoint_names = np.array(manifest.keypoint_names)

    @property
    def task(self) -> str:
        return self.manifest.task

    @property
    def name(self) -> str:
        return self.manifest.name

    def detect(
        self, image: np.ndarray, options: DecodeOptions, timer: StageTimer | None = None
    ) -> sv.Detections:
        """BGR uint8 image -> detections in image pixels, with ``class_name`` data."""
        return self.detect_many([image], options, timer)[0]

    def detect_many(
        self, images: list[np.ndarray], options: DecodeOptions, timer: StageTimer | None = None
    ) -> list[sv.Detections]:
        """Several images (a frame's crops) in as few model runs as the model takes."""
        decoder, m = self._decoder, self.manifest
        if not isinstance(decoder, DetectionDecoder):
            raise TypeError(f"model '{m.name}' is a {m.task} model: it classifies, not detects")
        runs = self._run(images, timer)
        t0 = time.perf_counter()
        found = []
        for image, (outputs, box, network) in zip(images, runs, strict=True):
            # Every input has the main one's decoder class, checked above.
            rows = [o[0] for o in outputs]
            decoded = cast(DetectionDecoder, network.decoder).decode(rows, options)
            decoded = one_box_per_object(decoded, m.nested_overlap, m.class_overlap_iou)
            found.append(self._placed(network, decoded, box, image))
        _add(timer, "postprocess", t0)
        return found

    def input_for(self, width: int, height: int) -> NetworkInput:
        """The network input an image of this size runs on."""
        if len(self.inputs) == 1:
            return self.inputs[0]
        sizes = [n.size for n in self.inputs]
        return self.inputs[fitting_input((width, height), sizes, self.manifest.input_stride)]

    def _run(
        self, images: list[np.ndarray], timer: StageTimer | None
    ) -> list[tuple[list[np.ndarray], Letterbox, NetworkInput]]:
        """Preprocess and run: each image's outputs, the box that maps back to it and the
        input it ran on (images on the same input run together)."""
        t0 = time.perf_counter()
        networks = [self.input_for(image.shape[1], image.shape[0]) for image in images]
        main = self.inputs[0].size
        prepared = [
            prepare(im, n.manifest, main, n.canvas) for im, n in zip(images, networks, strict=True)
        ]
        t1 = time.perf_counter()
        done: list[tuple[list[np.ndarray], BatchStats]] = [([], _NO_STATS)] * len(images)
        for network in dict.fromkeys(networks):
            rows = [i for i, n in enumerate(networks) if n is network]
            ran = network.batcher.infer_many([prepared[i][0] for i in rows])
            for row, result in zip(rows, ran, strict=True):
                done[row] = result
        t2 = time.perf_counter()
        if timer is not None:
            queued = sum(stats.queue_ms for _, stats in done)
            timer["preprocess"] = timer.get("preprocess", 0.0) + (t1 - t0) * 1000
            # Batched: the wait for the batch to form is its own stage, not inference.
            timer["inference"] = timer.get("inference", 0.0) + (t2 - t1) * 1000 - queued
            if self.batcher.batching:
                timer["batch_queue"] = timer.get("batch_queue", 0.0) + queued
        return [
            (outputs, box, network)
            for (outputs, _), (_, box), network in zip(done, prepared, networks, strict=True)
        ]

    def _placed(
        self, network: NetworkInput, detections: sv.Detections, box: Letterbox, image: np.ndarray
    ) -> sv.Detections:
        """Decoded detections in the image's pixels, with class and keypoint names."""
        m = network.manifest
        h, w = image.shape[:2]
        if len(detections):
            xyxy = box.to_image(detections.xyxy)
            xyxy[:, [0, 2]] = xyxy[:, [0, 2]].clip(0, w)
            xyxy[:, [1, 3]] = xyxy[:, [1, 3]].clip(0, h)
            detections.xyxy = xyxy
        proto_masks = detections.data.pop("proto_masks", None)
        if proto_masks is not None:
            detections.mask = box.masks_to_image(
                np.asarray(proto_masks), (m.input_width, m.input_height), (w, h), detections.xyxy
            )
        if "keypoints_xy" in detections.data:
            count, points = len(detections), len(self._keypoint_names)
            xy = np.asarray(detections.data["keypoints_xy"])
            detections.data["keypoints_xy"] = box.points_to_image(xy)
            detections.data["keypoints_class_name"] = np.tile(self._keypoint_names, (count, 1))
            detections.data["keypoints_class_id"] = np.tile(np.arange(points), (count, 1))
            # For drawing: the visualisation block finds the skeleton with the detections.
            detections.metadata["skeleton"] = [tuple(edge) for edge in m.skeleton]
        detections.data["class_name"] = (
            self._class_names[detections.class_id.astype(int)]
            if len(detections) and detections.class_id is not None
            else np.array([], dtype=str)
        )
        return detections

    def classify(self, image: np.ndarray, timer: StageTimer | None = None) -> np.ndarray:
        """BGR uint8 image -> each class's probability (a classifier's)."""
        return self.classify_many([image], timer)[0]

    def classify_many(
        self, images: list[np.ndarray], timer: StageTimer | None = None
    ) -> list[np.ndarray]:
        """Several images (a frame's crops) in as few model runs as the model takes."""
        decoder = self._decoder
        if not isinstance(decoder, ClassificationDecoder):
            raise TypeError(f"model '{self.name}' is a {self.task} model: it detects")
        runs = self._run(images, timer)
        t0 = time.perf_counter()
        probabilities = [decoder.probabilities([o[0] for o in outputs]) for outputs, _, _ in runs]
        _add(timer, "postprocess", t0)
        return probabilities

    def warm_up(self, runs: int = 3) -> None:
        """A few runs on every input (an image of the input's own size runs on it)."""
        for network in self.inputs:
            width, height = network.size
            image = np.full((height, width, 3), 114, np.uint8)
            for _ in range(runs):
                if isinstance(self._decoder, ClassificationDecoder):
                    self.classify(image)
                else:
                    self.detect(image, DecodeOptions())

    @classmethod
    def from_directory(
        cls, directory: Path, session: InferenceSession | None = None
    ) -> DetectionModel:
        """The model in ``directory`` on ``session`` (default: ONNX Runtime, no batching)."""
        from .onnx_session import OnnxRuntimeSession

        manifest = ModelManifest.load(directory)
        return cls(manifest, session or OnnxRuntimeSession(manifest.onnx_path(directory)))

    def close(self) -> None:
        """Stop each input's batcher, then its session (idempotent)."""
        for network in self.inputs:
            network.batcher.close()
            network.batcher.session.close()


def _add(timer: StageTimer | None, stage: str, started: float) -> None:
    if timer is not None:
        timer[stage] = timer.get(stage, 0.0) + (time.perf_counter() - started) * 1000
