from __future__ import annotations

import json

import pytest

from streaming.errors import InvalidRequest
from streaming.protocol.messages import WorkflowConfiguration
from streaming.workflows.library import WorkflowLibrary, object_detection


def test_built_ins_without_a_directory():
    library = WorkflowLibrary(None, "yolov3-tiny-416")
    workflows, unreadable = library.list()
    assert [w.summary()["id"] for w in workflows] == [
        "local/object-detection",
        "local/image-blur",
        "local/people-counting",
        "local/zone-occupancy",
        "local/privacy-blur",
    ]
    assert unreadable == []
    assert workflows[0].summary()["outputs"] == ["predictions", "annotated"]
    assert workflows[1].summary()["outputs"] == ["output_image"]
    assert library.get("local", "object-detection").specification == object_detection()
    assert library.get(None, "object-detection").origin == "built-in"  # local is the default


def test_files_add_and_replace_workflows_and_unreadable_ones_are_named(tmp_path):
    boxes_only = {**object_detection(), "outputs": object_detection()["outputs"][:1]}
    (tmp_path / "boxes.json").write_text(
        json.dumps({"title": "Boxes", "specification": boxes_only})
    )
    (tmp_path / "object-detection.json").write_text(json.dumps(boxes_only))  # a bare spec
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "no-steps.json").write_text(json.dumps({"title": "nothing"}))
    library = WorkflowLibrary(tmp_path, "yolov3-tiny-416")

    workflows, unreadable = library.list()
    by_id = {w.workflow_id: w for w in workflows}
    assert set(by_id) == {"object-detection", "image-blur", "people-counting", "zone-occupancy",
                          "privacy-blur", "boxes"}  # fmt: skip
    assert by_id["object-detection"].origin == "library"  # the file replaces the built-in
    assert by_id["boxes"].title == "Boxes" and by_id["boxes"].specification == boxes_only
    assert {p["file"] for p in unreadable} == {"broken.json", "no-steps.json"}
    assert "no specification with steps" in str(unreadable)

    with pytest.raises(InvalidRequest, match=r"broken\.json is unreadable"):
        library.get("local", "broken")


@pytest.mark.parametrize(
    ("workspace", "workflow_id"),
    [("local", "missing"), ("someone-else", "object-detection"), ("local", "../etc/passwd")],
)
def test_unknown_names_are_refused_with_what_exists(tmp_path, workspace, workflow_id):
    (tmp_path.parent / "passwd.json").write_text(json.dumps(object_detection()))
    library = WorkflowLibrary(tmp_path, "yolov3-tiny-416")
    with pytest.raises(InvalidRequest) as caught:
        library.get(workspace, workflow_id)
    assert f"'{workspace}/{workflow_id}' not found" in caught.value.message
    assert "local/object-detection" in caught.value.message


def test_a_request_sends_a_specification_or_names_one():
    library = WorkflowLibrary(None, "yolov3-tiny-416")
    inline = {"steps": [], "outputs": []}
    assert library.specification(WorkflowConfiguration(workflow_specification=inline)) == inline
    named = WorkflowConfiguration(workspace_name="local", workflow_id="object-detection")
    assert library.specification(named) == object_detection()
    with pytest.raises(InvalidRequest, match="workflow_specification or workflow_id"):
        library.specification(WorkflowConfiguration())
