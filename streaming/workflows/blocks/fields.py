"""What a block's fields take: the kinds of per-frame values, and ``FieldSpec``, each field
declared once (what the compiler checks and ``/workflows/blocks`` shows)."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class FieldSpec:
    """One block field, declared once: what it takes (``type``, ``minimum``/``maximum``,
    ``choices``; for a selector, its ``kinds``) and its default. The compiler checks every
    value against it (``check``), literal or a parameter's, and ``/workflows/blocks`` and
    ``/workflows/blocks/describe`` show it (``describe``)."""

    kinds: tuple[str, ...] = (ANY,)
    default: Any = REQUIRED
    per_frame: bool = False
    """True when the field takes per-frame data (images, predictions) through a selector."""
    entries: bool = False
    """An object whose entries may each be a literal, a parameter or per-frame data (the
    reference's ``evaluation_parameters``, a webhook's ``json_payload``): the block's config
    holds the entries' names, and each frame's inputs the object with every entry's value."""
    listed: bool = False
    """A list whose items may each be a literal, a parameter or per-frame data
    (``first_non_empty_or_default``'s ``data``): the block's config holds how many, and
    each frame's inputs the list of values (None where one is missing)."""
    literal: bool = False
    """A per-frame field that takes a literal or a parameter too (an e-mail's recipients:
    written in the step, or a step's output)."""
    steps: bool = False
    """A list of step selectors (``$steps.<name>``): the steps a flow-control block lets run
    or not (``next_steps``); the block gets their names."""
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
        if self.per_frame:
            takes = "selector"  # per-frame data: a step's output or an input
        elif self.entries:
            takes = "object of literals or selectors"
        elif self.listed:
            takes = "list of literals or selectors"
        elif self.steps:
            takes = "list of step selectors"
        else:
            takes = "literal or parameter"
        entry: dict[str, Any] = {
            "type": self.type,
            "takes": takes,
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
