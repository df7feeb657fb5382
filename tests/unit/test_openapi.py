"""The API as /openapi.json describes it: every operation in an area, with a summary and a
description, and the API described at the top."""

from __future__ import annotations

from streaming.config import Settings
from streaming.server import create_app
from streaming.server.docs import openapi_document


def test_every_operation_has_an_area_a_summary_and_a_description_and_its_own_id(tmp_path):
    # ICE restricted as the suite's conftest does: making an app sets it for the process.
    settings = Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "models",
                        ice_host_addresses=["127.0.0.1"])  # fmt: skip
    app = create_app(settings)
    spec = openapi_document(app)  # what /openapi.json serves and /docs shows
    assert spec["info"]["description"].startswith("Real-time video inference over WebRTC")
    areas = [tag["name"] for tag in spec["tags"]]
    used = set()
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            where = f"{method.upper()} {path}"
            assert len(operation.get("tags", [])) == 1, where
            assert operation["tags"][0] in areas, where
            assert operation.get("summary") and operation.get("description"), where
            used.add(operation["tags"][0])
    assert used == set(areas)  # no area listed that nothing is in
    # One id per operation (a route answering GET and POST gets one for each method).
    ids = [op["operationId"] for methods in spec["paths"].values() for op in methods.values()]
    assert len(ids) == len(set(ids))
