"""Workflows a request can name instead of sending a specification: built-ins plus a directory.

A request names one as ``workspace_name`` + ``workflow_id`` (inference-sdk's
``workflow="object-detection", workspace="local"``). Built-ins live in workspace ``local``; each
``<id>.json`` in ``VISIONSTREAM_WORKFLOWS_DIR`` is ``local/<id>`` too and may replace a built-in.
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
from ..protocol.workflows import (
    image_blur,
    object_detection,
    people_counting,
    privacy_blur,
    zone_occupancy,
)
from ..suggest import did_you_mean, shown

__all__ = [
    "LOCAL_WORKSPACE",
    "LibraryWorkflow",
    "WorkflowLibrary",
    "WorkflowNotFound",
]

log = logging.getLogger("visionstream")

LOCAL_WORKSPACE = "local"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


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
        known = [w.summary()["id"] for w in self.list()[0]]
        close = did_you_mean(name, known)
        raise WorkflowNotFound(
            f"workflow '{shown(name)}' not found"
            + (f"; {close}" if close else "")
            + f" (this server's: {', '.join(known[:10]) or 'none'}; or send the "
            "specification itself, workflow_specification)"
        )

    def stored(self, workspace: str | None, workflow_id: str) -> dict[str, Any]:
        """A stored workflow's specification, as ``inner_workflow`` steps name one: in the
        reference's form (``workflow_workspace_id`` being the author's Roboflow workspace)
        the id is looked up among this server's workflows, whatever the workspace."""
        try:
            return self.get(LOCAL_WORKSPACE, workflow_id).specification
        except WorkflowNotFound:
            where = (
                f"the <id>.json files in VISIONSTREAM_WORKFLOWS_DIR ({self._directory})"
                if self._directory is not None
                else "none: VISIONSTREAM_WORKFLOWS_DIR is not set (a directory of <id>.json files)"
            )
            builtin = ", ".join(sorted(self._builtins))
            raise WorkflowNotFound(
                f"workflow '{shown(f'{workspace}/{workflow_id}')}' is not stored here; a child "
                f"workflow by id is one of this server's stored workflows: {where}, and the "
                f"built-ins ({builtin}); or give its workflow_definition inline"
            ) from None

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
