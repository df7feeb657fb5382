"""What a block's fields take: the kinds of per-frame values, and ``FieldSpec``, each field
declared once (what the compiler checks and ``/workflows/blocks`` shows)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, cast

from ...errors import WorkflowCompilationError

__all__ = [
    "ANY",
    "CLASSIFICATION",
    "CREDENTIAL_HEADERS",
    "DETECTIONS",
    "DETECTION_KINDS",
    "IMAGE",
    "KEYPOINTS",
    "REQUIRED",
    "SECRET",
    "SEGMENTATION",
    "VIDEO_METADATA",
    "FieldSpec",
    "FieldType",
    "Takes",
    "fraction",
]

IMAGE = "image"
DETECTIONS = "object_detection_prediction"
SEGMENTATION = "instance_segmentation_prediction"
KEYPOINTS = "keypoint_detection_prediction"
CLASSIFICATION = "classification_prediction"
DETECTION_KINDS = (DETECTIONS, SEGMENTATION, KEYPOINTS)
"""Every kind of detections (boxes, with masks or keypoints): what tracking, zones, filters
and drawing take."""
VIDEO_METADATA = "video_metadata"
SECRET = "secret"
"""A lent secret (``environment_secrets_store``): it flows only into a field that names this
kind among its ``kinds`` (a password, a credential header), never into ``ANY``, an output,
a message or a payload. For an object of entries (headers), only into credential entries."""
ANY = "*"
REQUIRED = object()
CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-auth-token",
        "x-access-token",
    }
)
"""The headers a lent secret may fill (a webhook's ``headers``)."""


FieldType = Literal["any", "number", "integer", "boolean", "string", "list", "object"]

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "string": (str,),
    "list": (list, tuple),
    "object": (dict,),
}


class Takes(Enum):
    """What a field takes, one mode per field: where its value lives once compiled (the
    block's settings, or each frame's inputs) and what a step may write in it."""

    LITERAL = "literal or parameter"
    """A literal or a parameter's value, fixed at compile: in the block's settings."""
    FRAME = "selector"
    """Per-frame data (images, predictions, a step's output) through a selector: in each
    frame's inputs."""
    FRAME_OR_LITERAL = "selector, literal or parameter"
    """Per-frame data, or a literal or a parameter given every frame (an e-mail's
    recipients: written in the step, or a step's output)."""
    ENTRIES = "object of literals or selectors"
    """An object whose entries may each be a literal, a parameter or per-frame data (the
    reference's ``evaluation_parameters``, a webhook's ``json_payload``): the settings hold
    the entries' names, and each frame's inputs the object with every entry's value."""
    LIST = "list of literals or selectors"
    """A list whose items may each be a literal, a parameter or per-frame data
    (``first_non_empty_or_default``'s ``data``): the settings hold how many, and each
    frame's inputs the list of values (None where one is missing)."""
    STEPS = "list of step selectors"
    """``$steps.<name>`` selectors: the steps a flow-control block lets run or not
    (``next_steps``); the settings hold their names."""

    @property
    def per_frame(self) -> bool:
        """The value reaches the block in each frame's inputs, not in its settings."""
        return self in (Takes.FRAME, Takes.FRAME_OR_LITERAL)

    @property
    def shown(self) -> str:
        """As ``/workflows/blocks/describe`` names it (both per-frame modes: ``selector``)."""
        return Takes.FRAME.value if self.per_frame else self.value


@dataclass(frozen=True)
class FieldSpec:
    """One block field, declared once: what it takes (``type``, ``minimum``/``maximum``,
    ``choices``; for a selector, its ``kinds``) and its default. The compiler checks every
    value against it (``check``), literal or a parameter's, and ``/workflows/blocks`` and
    ``/workflows/blocks/describe`` show it (``describe``)."""

    kinds: tuple[str, ...] = (ANY,)
    default: Any = REQUIRED
    takes: Takes = Takes.LITERAL
    """The field's one mode (``Takes``): settings or per-frame inputs, and what it admits."""
    type: FieldType = "any"
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    """An exclusive lower bound (``text_scale`` above 0)."""
    below: float | None = None
    """An exclusive upper bound (an overlap ratio below 1)."""
    choices: tuple[Any, ...] | None = None
    nullable: bool = False
    """``null`` is taken too, though the default is a value (``custom_confidence``)."""
    description: str = ""

    @property
    def per_frame(self) -> bool:
        """The block gets this field's value in each frame's inputs, not in its settings."""
        return self.takes.per_frame

    def takes_secret(self, entry: str | None = None) -> bool:
        """This field (or its ``entry``, for an object of entries) takes a lent secret: it
        names ``SECRET`` among its kinds, and an entry is a credential header."""
        if SECRET not in self.kinds:
            return False
        return entry is None or entry.lower() in CREDENTIAL_HEADERS

    def check(self, step: str, name: str, value: Any) -> Any:
        """``value`` if this field takes it (a number as a float, an integer as an int);
        else a 400 naming the step, the field and what it takes. ``None`` passes where the
        default is ``None`` or the field is ``nullable``."""
        if value is None and (self.default is None or self.nullable):
            return None
        if self.choices is not None:
            if value not in self.choices:
                raise WorkflowCompilationError(
                    f"step '{step}': {name} must be one of "
                    f"{', '.join(map(str, self.choices))}, got {value!r}"
                )
            return value
        if self.type == "any":
            return value
        kinds = _PYTHON_TYPES[self.type]
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            raise WorkflowCompilationError(
                f"step '{step}': {name} must be {self._what()}, got {value!r}"
            )
        if self.type not in ("number", "integer"):
            return value
        number = cast(float, value)
        if not self._in_range(number):
            raise WorkflowCompilationError(
                f"step '{step}': {name} must be {self._what()}, got {value!r}"
            )
        return float(number) if self.type == "number" else value

    def _in_range(self, value: float) -> bool:
        return (
            (self.minimum is None or value >= self.minimum)
            and (self.maximum is None or value <= self.maximum)
            and (self.above is None or value > self.above)
            and (self.below is None or value < self.below)
        )

    def _what(self) -> str:
        article = "an" if self.type in ("integer", "object") else "a"
        bounds = []
        if self.minimum is not None:
            bounds.append(f"at least {self.minimum:g}")
        if self.above is not None:
            bounds.append(f"above {self.above:g}")
        if self.below is not None:
            bounds.append(f"below {self.below:g}")
        if self.maximum is not None:
            bounds.append(f"at most {self.maximum:g}")
        return f"{article} {self.type}" + (f" ({', '.join(bounds)})" if bounds else "")

    def describe(self) -> dict[str, Any]:
        """The field as ``/workflows/blocks/describe`` shows it."""
        entry: dict[str, Any] = {
            "type": self.type,
            "takes": self.takes.shown,
            "kinds": list(self.kinds),
            "required": self.default is REQUIRED,
        }
        if self.default is not REQUIRED:
            entry["default"] = self.default
        for key in ("minimum", "maximum", "above", "below", "choices"):
            if (value := getattr(self, key)) is not None:
                entry[key] = list(value) if key == "choices" else value
        if self.description:
            entry["description"] = self.description
        return entry


def fraction(default: float) -> FieldSpec:
    """A number from 0 to 1 (a confidence, an IoU threshold)."""
    return FieldSpec(default=default, type="number", minimum=0.0, maximum=1.0)
