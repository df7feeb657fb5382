"""Workflow specifications tests share."""

from __future__ import annotations

from streaming.protocol.workflows import people_counting

__all__ = ["crossing_events"]


def crossing_events(url: str) -> dict:
    """The people counter, plus one webhook per crossing: ``continue_if`` lets the sink run
    only on frames where someone crossed, either way."""
    spec = people_counting()
    crossed = [
        {
            "type": "UnaryStatement",
            "operand": {"type": "DynamicOperand", "operand_name": name},
            "operator": {"type": "(Sequence) is not empty"},
        }
        for name in ("crossed_in", "crossed_out")
    ]
    spec["steps"] += [
        {
            "type": "roboflow_core/continue_if@v1",
            "name": "crossing",
            "condition_statement": {"type": "StatementGroup", "operator": "or",
                                    "statements": crossed},
            "evaluation_parameters": {"crossed_in": "$steps.counter.detections_in",
                                      "crossed_out": "$steps.counter.detections_out"},
            "next_steps": ["$steps.event"],
        },
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
