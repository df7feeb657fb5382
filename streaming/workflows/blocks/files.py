"""Results to files on the server (``local_file_sink``): only inside the directory
``VISIONSTREAM_FILE_SINK_DIR`` names, each step's ``target_directory`` checked when the
workflow is compiled (no way out through ``..`` or a symbolic link), files readable by the
server's user alone (its umask). What every step writes there counts against one quota
(``VISIONSTREAM_LIMIT_FILE_SINK_MB``) and leaves the disk
``VISIONSTREAM_LIMIT_FILE_SINK_MIN_FREE_MB`` free: a write past either is an error on that
step, and nothing is removed."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, ClassVar, Literal

from sinks.quota import DiskQuota, QuotaExceeded, quota_for

from ...errors import WorkflowCompilationError
from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import FieldSpec, Takes

__all__ = ["LocalFileSinkBlock", "sink_directory"]

log = logging.getLogger(__name__)

_PREFIX = re.compile(r"[^\x00-\x1f\x7f./\\][^\x00-\x1f\x7f/\\]{0,127}")
"""A file name's start: no control characters (CR, LF, NUL), separators or leading dot."""


def sink_root(step: str, context: BuildContext) -> tuple[Path, DiskQuota]:
    """The file sink directory and its quota; a 400 naming the setting when there is none."""
    root = context.settings.file_sink_dir if context.settings is not None else None
    if root is None:
        raise WorkflowCompilationError(
            f"step '{step}': local_file_sink writes only inside the directory "
            "VISIONSTREAM_FILE_SINK_DIR names, and it is not set on this server"
        )
    limits = context.limits
    root = Path(root).resolve()
    return root, quota_for(root, limits.file_sink_mb << 20, limits.file_sink_min_free_mb << 20)


def sink_directory(step: str, context: BuildContext, target: str) -> Path:
    """``target`` (relative to the file sink directory, or absolute inside it), resolved;
    a 400 naming the setting when there is no such directory or the target leaves it."""
    root, _ = sink_root(step, context)
    if any(ord(c) < 0x20 or c == "\x7f" for c in target):
        raise WorkflowCompilationError(
            f"step '{step}': target_directory {target!r} has a control character (NUL, CR, LF)"
        )
    resolved = (root / target).resolve()
    if not resolved.is_relative_to(root):
        raise WorkflowCompilationError(
            f"step '{step}': target_directory {target!r} is outside the file sink directory"
        )
    return resolved


@dataclass(frozen=True, kw_only=True)
class LocalFileSinkSettings(BlockSettings):
    file_type: Literal["csv", "json", "txt"] = setting(
        FieldSpec(default="csv", choices=("csv", "json", "txt"))
    )
    output_mode: Literal["append_log", "separate_files"] = setting(
        FieldSpec(choices=("append_log", "separate_files"))
    )
    target_directory: str = setting(FieldSpec(type="string"))
    file_name_prefix: str = setting(FieldSpec(default="workflow_output", type="string"))
    max_entries_per_file: int = setting(FieldSpec(default=1024, type="integer", minimum=1))


class LocalFileSinkBlock(Block):
    """Each element's ``content`` to a file of its own (``separate_files``) or appended to
    a log (``append_log``: a CSV's header once, JSON one document per line, a new file
    every ``max_entries_per_file`` entries), named ``<prefix>_<time>.<type>``."""

    type_ids = ("roboflow_core/local_file_sink@v1",)
    inputs = {"content": FieldSpec(("string",), takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = LocalFileSinkSettings
    outputs = {"error_status": "boolean", "message": "string"}

    def __init__(self, name: str, config: LocalFileSinkSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        prefix = config.file_name_prefix
        if not _PREFIX.fullmatch(prefix):
            raise WorkflowCompilationError(
                f"step '{name}': file_name_prefix must be a file name (no leading dot, slash, "
                f"backslash or control character; at most 128 characters), got {prefix!r}"
            )
        self.directory = sink_directory(name, context, config.target_directory)
        _, self.quota = sink_root(name, context)
        self.prefix = prefix
        self.file_type = config.file_type
        self.append = config.output_mode == "append_log"
        self.limit = config.max_entries_per_file
        self._log: IO[str] | None = None
        self._entries = 0

    def _path(self, extension: str) -> Path:
        stamp = datetime.now().strftime("%Y_%m_%d_%H_%M_%S_%f")
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.directory / f"{self.prefix}_{stamp}.{extension}"

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        content = inputs["content"]
        if not isinstance(content, str):
            return {"error_status": True, "message": "content must be text"}
        try:
            if not self.append:
                text = _line(content)
                self.quota.admit(len(text.encode()))
                self._path(self.file_type).write_text(text)
            else:
                self._append(content)
        except ValueError:
            return {"error_status": True, "message": "Invalid JSON content"}
        except QuotaExceeded as exc:
            return {"error_status": True, "message": f"Not written: {exc}"}
        except OSError as exc:
            log.warning("step %s: cannot write: %s", self.name, exc)
            return {"error_status": True, "message": f"Could not write: {exc.strerror}"}
        return {"error_status": False, "message": "Data saved successfully"}

    def _append(self, content: str) -> None:
        if self.file_type == "json":  # one document per line
            content = json.dumps(json.loads(content))
        if self._log is None or self._entries >= self.limit:
            self.close()
            extension = "jsonl" if self.file_type == "json" else self.file_type
            self._log = self._path(extension).open("w")
            self._entries = 0
        elif self.file_type == "csv":  # the header once, at the top of each file
            content = content.split("\n", 1)[1] if "\n" in content else ""
        line = _line(content)
        self.quota.admit(len(line.encode()))
        self._log.write(line)
        self._log.flush()
        self._entries += 1

    def close(self) -> None:
        log_file, self._log = self._log, None
        if log_file is not None:
            log_file.close()


def _line(content: str) -> str:
    return content if content.endswith("\n") else content + "\n"
