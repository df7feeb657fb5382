"""Secrets for a workflow's steps from the server's environment
(``environment_secrets_store``): only the variables ``VISIONSTREAM_WORKFLOW_SECRETS`` names,
never the server's own settings; a name outside them is refused when compiled."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import WorkflowCompilationError
from ...settings.prefix import LEGACY_PREFIX, PREFIX
from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import SECRET, FieldSpec

__all__ = ["EnvironmentSecretsStoreBlock", "SecretsSettings"]

_OWN = (PREFIX, LEGACY_PREFIX)
"""The server's and the client's own settings (and their old names): never a workflow's."""


@dataclass(frozen=True, kw_only=True)
class SecretsSettings(BlockSettings):
    variables_storing_secrets: list[Any] = setting(FieldSpec(type="list"))


class EnvironmentSecretsStoreBlock(Block):
    """Each named variable's value, as an output named for it in lower case (None where
    the variable is not set)."""

    type_ids = ("roboflow_core/environment_secrets_store@v1",)
    Settings: ClassVar[type[BlockSettings]] = SecretsSettings
    outputs: ClassVar[dict[str, str]] = {}

    @classmethod
    def outputs_of(cls, given: dict[str, Any]) -> dict[str, str]:
        names = given.get("variables_storing_secrets")
        listed = names if isinstance(names, list) else []
        return {name.lower(): SECRET for name in listed if isinstance(name, str)}

    def __init__(self, name: str, config: SecretsSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        variables = config.variables_storing_secrets
        if not variables or not all(isinstance(v, str) and v for v in variables):
            raise WorkflowCompilationError(
                f"step '{name}': variables_storing_secrets must be a non-empty list of names"
            )
        allowed = set(context.settings.workflow_secrets) if context.settings is not None else set()
        refused = sorted(v for v in variables if v not in allowed or v.upper().startswith(_OWN))
        if refused:
            raise WorkflowCompilationError(
                f"step '{name}': environment variables {refused} are not for workflows to "
                "read; the server names those it lends in VISIONSTREAM_WORKFLOW_SECRETS "
                "(never its own VISIONSTREAM_* or STREAMING_* settings)"
            )
        self.variables = list(variables)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return {name.lower(): os.environ.get(name) for name in self.variables}
