"""Workflows a request can name instead of sending a specification: built-ins plus a directory.

A request names one as ``workspace_name`` + ``workflow_id`` (inference-sdk's
``workflow="object-detection", workspace="local"``). Built-ins live in workspace ``local``; each
``<id>.json`` in ``STREAMING_WORKFLOWS_DIR`` is ``local/<id>`` too and may replace a built-in.
The directory is read on every lookup, so a workflow dropped in is usable without a restart.
"""

from __future__ import annotations

import builtins
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidRequest
from ..protocol.messages import WorkflowConfiguration

__all__ = [
    "LOCAL_WORKSPACE",
    "LibraryWorkflow",
    "WorkflowLibrary",
    "WorkflowNotFound",
    "image_blur",
    "object_detection",
    "people_counting",
    "privacy_blur",
    "zone_occupancy",
]

log = logging.getLogger("visionstream")

LOCAL_WORKSPACE = "local"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def object_detection(model_id: str = "yolov3-tiny-416") -> dict[str, Any]:
    """Detect -> boxes -> labels; outputs ``predictions`` and the ``annotated`` image."""
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            {
                "type": "roboflow_core/roboflow_object_detection_model@v2",
                "name": "detection",
                "images": "$inputs.image",
                "model_id": model_id,
            },
            {
                "type": "roboflow_core/bounding_box_visualization@v1",
                "name": "boxes",
                "image": "$inputs.image",
                "predictions": "$steps.detection.predictions",
            },
            {
                "type": "roboflow_core/label_visualization@v1",
                "name": "labels",
                "image": "$steps.boxes.image",
                "predictions": "$steps.detection.predictions",
            },
        ],
        "outputs": [
            {
                "type": "JsonField",
                "name": "predictions",
                "selector": "$steps.detection.predictions",
            },
            {"type": "JsonField", "name": "annotated", "selector": "$steps.labels.image"},
        ],
    }


def image_blur(blur_type: str = "average", kernel_size: int = 5) -> dict[str, Any]:
    """No model: the frame blurred, as ``output_image`` (the reference server runs this
    offline too, so benchmarks compare the two servers on it)."""
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            {
                "type": "roboflow_core/image_blur@v1",
                "name": "blur",
                "image": "$inputs.image",
                "blur_type": blur_type,
                "kernel_size": kernel_size,
            }
        ],
        "outputs": [{"type": "JsonField", "name": "output_image", "selector": "$steps.blur.image"}],
    }


# Defaults for a 640x480 frame (a webcam's usual size); a request moves them with
# workflows_parameters: {"line": [[x1, y1], [x2, y2]]} or {"zone": [[x, y], ...]}.
DEFAULT_LINE = [[320, 0], [320, 480]]
DEFAULT_ZONE = [[160, 120], [480, 120], [480, 360], [160, 360]]


def _people(model_id: str) -> list[dict[str, Any]]:
    """Detect people and track them: the steps the monitoring workflows start with."""
    return [
        {"type": "WorkflowParameter", "name": "classes", "default_value": ["person"]},
        {
            "type": "roboflow_core/roboflow_object_detection_model@v2",
            "name": "detection",
            "images": "$inputs.image",
            "model_id": model_id,
            "class_filter": "$inputs.classes",
        },
        {
            "type": "roboflow_core/byte_tracker@v3",
            "name": "tracker",
            "image": "$inputs.image",
            "detections": "$steps.detection.predictions",
        },
    ]


def _split(parts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``_people``'s parameter goes with the inputs, its steps with the steps."""
    inputs = [p for p in parts if p["type"] == "WorkflowParameter"]
    return inputs, [p for p in parts if p["type"] != "WorkflowParameter"]


def people_counting(model_id: str = "yolov3-tiny-416") -> dict[str, Any]:
    """People counted as they cross a line (parameter ``line``): ``count_in``, ``count_out``,
    the tracked ``predictions`` and the ``annotated`` image (line, counts, boxes, ids, paths)."""
    parameters, steps = _split(_people(model_id))
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "line", "default_value": DEFAULT_LINE},
            *parameters,
        ],
        "steps": [
            *steps,
            {
                "type": "roboflow_core/line_counter@v2",
                "name": "counter",
                "image": "$inputs.image",
                "detections": "$steps.tracker.tracked_detections",
                "line_segment": "$inputs.line",
                "triggering_anchor": "CENTER",
            },
            {
                "type": "roboflow_core/trace_visualization@v1",
                "name": "trace",
                "image": "$inputs.image",
                "predictions": "$steps.tracker.tracked_detections",
            },
            {
                "type": "roboflow_core/bounding_box_visualization@v1",
                "name": "boxes",
                "image": "$steps.trace.image",
                "predictions": "$steps.tracker.tracked_detections",
            },
            {
                "type": "roboflow_core/label_visualization@v1",
                "name": "labels",
                "image": "$steps.boxes.image",
                "predictions": "$steps.tracker.tracked_detections",
                "text": "Tracker Id",
            },
            {
                "type": "roboflow_core/line_counter_visualization@v1",
                "name": "line_drawing",
                "image": "$steps.labels.image",
                "zone": "$inputs.line",
                "count_in": "$steps.counter.count_in",
                "count_out": "$steps.counter.count_out",
            },
        ],
        "outputs": [
            {"type": "JsonField", "name": "count_in", "selector": "$steps.counter.count_in"},
            {"type": "JsonField", "name": "count_out", "selector": "$steps.counter.count_out"},
            {
                "type": "JsonField",
                "name": "predictions",
                "selector": "$steps.tracker.tracked_detections",
            },
            {"type": "JsonField", "name": "annotated", "selector": "$steps.line_drawing.image"},
        ],
    }


def zone_occupancy(model_id: str = "yolov3-tiny-416") -> dict[str, Any]:
    """People in a zone (parameter ``zone``), each with its ``time_in_zone`` in seconds:
    ``predictions`` (those inside) and the ``annotated`` image (zone, boxes, seconds)."""
    parameters, steps = _split(_people(model_id))
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "zone", "default_value": DEFAULT_ZONE},
            *parameters,
        ],
        "steps": [
            *steps,
            {
                "type": "roboflow_core/time_in_zone@v3",
                "name": "timer",
                "image": "$inputs.image",
                "detections": "$steps.tracker.tracked_detections",
                "zone": "$inputs.zone",
            },
            {
                "type": "roboflow_core/polygon_zone_visualization@v1",
                "name": "zone_drawing",
                "image": "$inputs.image",
                "zone": "$inputs.zone",
            },
            {
                "type": "roboflow_core/bounding_box_visualization@v1",
                "name": "boxes",
                "image": "$steps.zone_drawing.image",
                "predictions": "$steps.timer.timed_detections",
            },
            {
                "type": "roboflow_core/label_visualization@v1",
                "name": "labels",
                "image": "$steps.boxes.image",
                "predictions": "$steps.timer.timed_detections",
                "text": "Time In Zone",
            },
        ],
        "outputs": [
            {
                "type": "JsonField",
                "name": "predictions",
                "selector": "$steps.timer.timed_detections",
            },
            {"type": "JsonField", "name": "annotated", "selector": "$steps.labels.image"},
        ],
    }


def privacy_blur(model_id: str = "yolov3-tiny-416") -> dict[str, Any]:
    """Every person blurred (parameter ``classes`` to blur others too): ``annotated``."""
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "classes", "default_value": ["person"]},
        ],
        "steps": [
            {
                "type": "roboflow_core/roboflow_object_detection_model@v2",
                "name": "detection",
                "images": "$inputs.image",
                "model_id": model_id,
                "class_filter": "$inputs.classes",
                # Rather blur a shadow than leave a face: a low bar.
                "confidence": 0.25,
            },
            {
                "type": "roboflow_core/blur_visualization@v1",
                "name": "blur",
                "image": "$inputs.image",
                "predictions": "$steps.detection.predictions",
                "kernel_size": 31,
                "padding": 8,
            },
        ],
        "outputs": [{"type": "JsonField", "name": "annotated", "selector": "$steps.blur.image"}],
    }


class WorkflowNotFound(InvalidRequest):
    """No workflow by that name in this server's library."""

    code = "workflow_not_found"


@dataclass(frozen=True)
class LibraryWorkflow:
    """A workflow the server knows by name: built-in, or a file in the workflows directory."""

    workflow_id: str
    title: str
    description: str
    origin: str
    """``built-in`` or ``library`` (a file in the workflows directory)."""
    specification: dict[str, Any]
    workspace: str = LOCAL_WORKSPACE

    def summary(self) -> dict[str, Any]:
        outputs = self.specification.get("outputs", [])
        return {
            "id": f"{self.workspace}/{self.workflow_id}",
            "workspace_name": self.workspace,
            "workflow_id": self.workflow_id,
            "title": self.title,
            "description": self.description,
            "origin": self.origin,
            "outputs": [o.get("name") for o in outputs if isinstance(o, dict)],
            "geometry": self.geometry(),
        }

    def geometry(self) -> list[dict[str, Any]]:
        """Parameters whose default is a line (two [x, y] points) or a polygon (three or
        more): the page lets a user draw them on the video."""
        found = []
        for item in self.specification.get("inputs", []):
            if not isinstance(item, dict) or item.get("type") not in _PARAMETER_TYPES:
                continue
            default = item.get("default_value")
            if not isinstance(default, list) or not _is_points(default):
                continue
            kind = "line" if len(default) == 2 else "polygon"
            found.append({"name": item.get("name"), "kind": kind, "default": default})
        return found


_PARAMETER_TYPES = ("WorkflowParameter", "InferenceParameter")


def _is_points(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) >= 2
        and all(
            isinstance(p, list)
            and len(p) == 2
            and all(isinstance(c, int | float) and not isinstance(c, bool) for c in p)
            for p in value
        )
    )


class WorkflowLibrary:
    """Workflows by ``workspace/id``: the built-ins and the workflows directory."""

    def __init__(self, directory: Path | None, default_model: str) -> None:
        self._directory = directory
        self._builtins = {
            "object-detection": LibraryWorkflow(
                "object-detection",
                "Object detection",
                f"{default_model}: boxes and labels drawn on the video, predictions as data",
                "built-in",
                object_detection(default_model),
            ),
            "image-blur": LibraryWorkflow(
                "image-blur",
                "Image blur (no model)",
                "average blur, kernel 5: streaming without inference",
                "built-in",
                image_blur(),
            ),
            "people-counting": LibraryWorkflow(
                "people-counting",
                "People counting",
                "people tracked and counted as they cross a line (parameter 'line', default a "
                "vertical line across the middle of a 640x480 frame): count_in, count_out",
                "built-in",
                people_counting(default_model),
            ),
            "zone-occupancy": LibraryWorkflow(
                "zone-occupancy",
                "Zone occupancy",
                "people in a zone (parameter 'zone', default the middle of a 640x480 frame) "
                "with each one's time in it",
                "built-in",
                zone_occupancy(default_model),
            ),
            "privacy-blur": LibraryWorkflow(
                "privacy-blur",
                "Privacy blur",
                "every person blurred (parameter 'classes' to blur other classes too)",
                "built-in",
                privacy_blur(default_model),
            ),
        }

    def list(self) -> tuple[list[LibraryWorkflow], list[dict[str, str]]]:
        """Every workflow (built-ins first, a file of the same id replacing one), and the
        directory's files that could not be read, each with why."""
        found = dict(self._builtins)
        problems = []
        for path in self._files():
            try:
                found[path.stem] = self._read(path)
            except InvalidRequest as exc:
                problems.append({"file": path.name, "message": exc.message})
        return list(found.values()), problems

    def get(self, workspace: str | None, workflow_id: str) -> LibraryWorkflow:
        """Raises ``WorkflowNotFound`` (a 400 where a request names it, a 404 at its URL)."""
        name = f"{workspace}/{workflow_id}"
        if (workspace or LOCAL_WORKSPACE) == LOCAL_WORKSPACE and _ID.fullmatch(workflow_id):
            path = self._directory / f"{workflow_id}.json" if self._directory else None
            if path is not None and path.is_file():
                return self._read(path)
            if workflow_id in self._builtins:
                return self._builtins[workflow_id]
        known = ", ".join(w.summary()["id"] for w in self.list()[0])
        raise WorkflowNotFound(
            f"workflow '{name}' not found: send workflow_specification inline, "
            f"or name one of this server's workflows ({known})"
        )

    def specification(self, config: WorkflowConfiguration) -> dict[str, Any]:
        """The request's inline specification, else the library's workflow it names."""
        if config.workflow_specification is not None:
            return config.workflow_specification
        if not config.workflow_id:
            raise InvalidRequest(
                "workflow_configuration needs workflow_specification or workflow_id"
            )
        return self.get(config.workspace_name, config.workflow_id).specification

    def _files(self) -> builtins.list[Path]:
        if self._directory is None or not self._directory.is_dir():
            return []
        return sorted(p for p in self._directory.glob("*.json") if _ID.fullmatch(p.stem))

    @staticmethod
    def _read(path: Path) -> LibraryWorkflow:
        """A file holds a specification, or ``{"title", "description", "specification"}``."""
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            log.warning("workflow library: %s is unreadable: %s", path.name, exc)
            raise InvalidRequest(f"workflow file {path.name} is unreadable: {exc}") from exc
        if not isinstance(document, dict):
            raise InvalidRequest(f"workflow file {path.name} must hold a JSON object")
        spec = document.get("specification", document)
        if not isinstance(spec, dict) or not isinstance(spec.get("steps"), list):
            raise InvalidRequest(f"workflow file {path.name} has no specification with steps")
        return LibraryWorkflow(
            path.stem,
            str(document.get("title") or path.stem),
            str(document.get("description") or ""),
            "library",
            spec,
        )
