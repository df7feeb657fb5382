"""Workflow specifications tests share."""

from __future__ import annotations

from streaming.protocol.workflows import people_counting

__all__ = [
    "check_sliced",
    "crossing_events",
    "crossing_gate",
    "nested_fan_out",
    "sliced_detection",
]


def crossing_gate(*next_steps: str) -> dict:
    """``continue_if`` on the people counter's line: its ``next_steps`` (``$steps.<name>``)
    run only on frames where someone crossed, either way."""
    crossed = [
        {
            "type": "UnaryStatement",
            "operand": {"type": "DynamicOperand", "operand_name": name},
            "operator": {"type": "(Sequence) is not empty"},
        }
        for name in ("crossed_in", "crossed_out")
    ]
    return {
        "type": "roboflow_core/continue_if@v1",
        "name": "crossing",
        "condition_statement": {"type": "StatementGroup", "operator": "or", "statements": crossed},
        "evaluation_parameters": {
            "crossed_in": "$steps.counter.detections_in",
            "crossed_out": "$steps.counter.detections_out",
        },
        "next_steps": list(next_steps),
    }


def crossing_events(url: str) -> dict:
    """The people counter, plus one webhook per crossing (``crossing_gate``)."""
    spec = people_counting()
    spec["steps"] += [
        crossing_gate("$steps.event"),
        {
            "type": "roboflow_core/webhook_sink@v1",
            "name": "event",
            "url": url,
            "json_payload": {"count_in": "$steps.counter.count_in",
                             "count_out": "$steps.counter.count_out", "camera": "hall"},
            # Selectors here too, as the reference's manifest takes them.
            "query_parameters": {"out": "$steps.counter.count_out", "site": "north"},
            "headers": {"X-Count-In": "$steps.counter.count_in"},
            "cooldown_seconds": 0,
        },
    ]  # fmt: skip
    spec["outputs"].append(
        {"type": "JsonField", "name": "event", "selector": "$steps.event.message"}
    )
    return spec


def sliced_detection(model: str) -> dict:
    """Two stages whatever the frame shows: the frame cut into 2x2 overlapping tiles, the
    detector on each tile (one list per frame of a result per tile), stitched back."""
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            {"type": "roboflow_core/image_slicer@v2", "name": "tiles", "image": "$inputs.image",
             "slice_width": 192, "slice_height": 144},
            {"type": "roboflow_core/roboflow_object_detection_model@v2", "name": "det",
             "images": "$steps.tiles.slices", "model_id": model},
            {"type": "roboflow_core/detections_stitch@v1", "name": "stitch",
             "reference_image": "$inputs.image", "predictions": "$steps.det.predictions"},
        ],
        "outputs": [
            {"type": "JsonField", "name": "per_tile", "selector": "$steps.det.predictions"},
            {"type": "JsonField", "name": "stitched", "selector": "$steps.stitch.predictions"},
        ],
    }  # fmt: skip


def check_sliced(outputs: dict) -> None:
    """A result of ``sliced_detection`` on a 320x240 frame: a list of four tiles' results,
    each made on its own tile, nested as the reference nests them."""
    tiles = outputs["per_tile"]
    assert isinstance(tiles, list) and len(tiles) == 4, tiles
    assert all(t["image"] == {"width": 192, "height": 144} for t in tiles), tiles
    assert outputs["stitched"]["image"] == {"width": 320, "height": 240}


def nested_fan_out(fan_out: int, depth: int) -> dict:
    """Inner workflows ``depth`` deep, each binding its child's input to ``fan_out`` copies
    of its own: the text grows as fan_out**depth."""
    child: dict = {
        "version": "1.0",
        "inputs": [{"type": "WorkflowParameter", "name": "p"}],
        "steps": [{"type": "roboflow_core/expression@v1", "name": "leaf",
                   "data": {"x": "$inputs.p"}, "switch": {"type": "CasesDefinition",
                   "cases": [], "default": {"type": "StaticCaseResult", "value": "1"}}}],
        "outputs": [{"type": "JsonField", "name": "o", "selector": "$steps.leaf.output"}],
    }  # fmt: skip
    for level in range(depth):
        inputs = [{"type": "WorkflowParameter", "name": "p", "default_value": "x"}]
        child = {
            "version": "1.0",
            "inputs": inputs if level < depth - 1 else [],
            "steps": [{"type": "roboflow_core/inner_workflow@v1", "name": f"n{level}",
                       "workflow_definition": child,
                       "parameter_bindings": {"p": " ".join(["$inputs.p"] * fan_out)
                                              if level < depth - 1 else "y" * 64}}],
            "outputs": [{"type": "JsonField", "name": "o", "selector": f"$steps.n{level}.o"}],
        }  # fmt: skip
    return child
