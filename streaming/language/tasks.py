"""The reference's VLM task types, as questions: what each asks the model (instructions, the
user's text) and what it needs from the step (a prompt, classes, an output structure).
The JSON shapes asked for are the ones ``decoding`` reads back."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["TASKS", "TaskQuestion", "question", "requirement"]

TASKS = (
    "unconstrained",
    "ocr",
    "structured-answering",
    "classification",
    "multi-label-classification",
    "visual-question-answering",
    "caption",
    "detailed-caption",
    "object-detection",
)
"""The task types of the cloud VLM blocks, in the reference's order."""

_NEEDS = {
    "prompt": {"unconstrained", "visual-question-answering"},
    "classes": {"classification", "multi-label-classification", "object-detection"},
    "output_structure": {"structured-answering"},
}

_JSON_ONLY = "Answer with one JSON document only, in a ```json fenced block."


@dataclass(frozen=True)
class TaskQuestion:
    system: str | None
    text: str


def requirement(task: str, given: dict[str, Any]) -> str | None:
    """The reference's refusal of a step whose task needs a field it left out; None: fine."""
    for name, tasks in _NEEDS.items():
        if task in tasks and given.get(name) is None:
            return f"`{name}` parameter required to be set for task `{task}`"
    return None


def question(
    task: str,
    *,
    prompt: str | None,
    classes: list[str] | None,
    output_structure: dict[str, str] | None,
) -> TaskQuestion:
    """What a step of ``task`` asks (its required fields checked by ``requirement``)."""
    named = ", ".join(classes or [])
    if task == "unconstrained":
        return TaskQuestion(None, prompt or "")
    if task == "visual-question-answering":
        return TaskQuestion(
            "You answer questions about the image: an open question in a few sentences, a "
            "multiple-choice question with the letter of the answer only.",
            f"Question: {prompt}",
        )
    if task == "ocr":
        return TaskQuestion(
            "You read the text in the image and answer with that text only, in paragraphs "
            "that follow its layout.",
            "Read the text in the image.",
        )
    if task in ("caption", "detailed-caption"):
        length = "short" if task == "caption" else "extensive"
        return TaskQuestion(
            f"You describe images. The description should be {length}.",
            "Describe the image.",
        )
    if task == "classification":
        return TaskQuestion(
            "You classify images into exactly one of the user's classes. "
            + _JSON_ONLY
            + ' Its shape: {"class_name": "<one of the classes>", "confidence": 0.0-1.0}.',
            f"Classes: {named}",
        )
    if task == "multi-label-classification":
        return TaskQuestion(
            "You list which of the user's classes are visible in the image. "
            + _JSON_ONLY
            + ' Its shape: {"predicted_classes": [{"class": "<a class>", "confidence": '
            "0.0-1.0}]}, with only the classes you see.",
            f"Classes: {named}",
        )
    if task == "object-detection":
        return TaskQuestion(
            "You detect every instance of the user's classes in the image. "
            + _JSON_ONLY
            + ' Its shape: {"detections": [{"x_min": 0.1, "y_min": 0.2, "x_max": 0.3, '
            '"y_max": 0.4, "class_name": "<a class>", "confidence": 0.7}]}, coordinates as '
            "fractions (0.0-1.0) of the image's width and height.",
            f"Classes: {named}",
        )
    if task == "structured-answering":
        return TaskQuestion(
            "You answer with a JSON object that has every key the user lists; each key's "
            "value in the user's list says what that field must hold. " + _JSON_ONLY,
            "Fields:\n" + json.dumps(output_structure or {}, indent=2),
        )
    raise ValueError(f"no task type {task!r}")
