from __future__ import annotations

import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import settings

from streaming.inference.session import nvidia_driver_present
from streaming.rtc.ice import restrict_host_addresses
from tests.support.camera import RTSPCamera
from tests.support.server import ServerProcess, running_server

# The test process runs client peers too: keep their candidates on loopback as well.
restrict_host_addresses(["127.0.0.1"])

# The fuzzers (hypothesis, schemathesis) draw new examples every run where they explore; in CI
# they run derandomized, the same examples each time, so CI is never red at random. Each bug
# they found stays as an explicit @example.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(config, items):
    """GPU tests run where an NVIDIA driver is; elsewhere (CI) they are skipped, never failed."""
    if nvidia_driver_present():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Every server a test was handed is idle once the test and its own fixtures are done
    (a witness session, say): no session or publisher of it is still being torn down when
    the next test starts, so what that test counts on the server is its own doing, in any
    order. A test that leaves one open errors here, naming what is left."""
    servers = [v for v in (getattr(item, "funcargs", None) or {}).values()
               if isinstance(v, ServerProcess)]  # fmt: skip
    result = yield
    for server in servers:
        if server.process.poll() is None:  # a module's server stops with its last test
            server.wait_idle()
    return result


PHOTO_DIRS = [
    os.environ.get("VISIONSTREAM_TEST_PHOTOS", ""),
    str(Path.home() / ".cache/visionstream/test-data/usr/share/darknet/data"),
    "/usr/share/darknet/data",
]

DETECT_SPEC = {
    "version": "1.0",
    "inputs": [{"type": "InferenceImage", "name": "image"}],
    "steps": [
        {
            "type": "roboflow_core/roboflow_object_detection_model@v2",
            "name": "det",
            "images": "$inputs.image",
            "model_id": "yolov3-tiny-416",
        },
        {
            "type": "roboflow_core/bounding_box_visualization@v1",
            "name": "box",
            "image": "$inputs.image",
            "predictions": "$steps.det.predictions",
        },
        {
            "type": "roboflow_core/label_visualization@v1",
            "name": "lbl",
            "image": "$steps.box.image",
            "predictions": "$steps.det.predictions",
        },
    ],
    "outputs": [
        {"type": "JsonField", "name": "predictions", "selector": "$steps.det.predictions"},
        {"type": "JsonField", "name": "annotated", "selector": "$steps.lbl.image"},
    ],
}


@pytest.fixture(scope="session")
def photos() -> Path:
    for candidate in PHOTO_DIRS:
        if candidate and (Path(candidate) / "person.jpg").is_file():
            return Path(candidate)
    pytest.fail("Debian darknet photos not found: run tests/install.sh first")


def load_photo(photos: Path, name: str, size: tuple[int, int] = (640, 480)) -> np.ndarray:
    image = cv2.imread(str(photos / name))
    assert image is not None, name
    return cv2.resize(image, size)


# Where tests/install.sh puts the default model; read when the suite starts, before any test
# changes HOME (the unit tests run with an empty one).
INSTALLED_MODELS = Path.home() / ".cache" / "visionstream" / "models"


@pytest.fixture(scope="session")
def default_model_dir(tmp_path_factory) -> Path:
    """A models directory of the suite's own holding the default model, copied once from
    where ``visionstream models pull`` (tests/install.sh) put it: tests read neither the
    user's cache nor the environment for it."""
    from streaming.inference.default_model import DEFAULT_MODEL_ID, ensure_default_model

    installed = INSTALLED_MODELS / DEFAULT_MODEL_ID
    if not (installed / "manifest.json").is_file():
        pytest.fail(f"the default model is not in {installed}: run tests/install.sh first")
    models = tmp_path_factory.mktemp("models")
    shutil.copytree(installed, models / DEFAULT_MODEL_ID)
    # A model pulled by an earlier version gets today's manifest settings (no download).
    ensure_default_model(models)
    return models


@pytest.fixture(scope="session")
def ocr_model_files() -> Path:
    """Where ``visionstream models pull pp-ocrv4`` (tests/install.sh) put the OCR model; a
    test copies it into a models directory of its own."""
    from streaming.inference.ocr_model import OCR_MODEL_ID

    installed = INSTALLED_MODELS / OCR_MODEL_ID
    if not (installed / "manifest.json").is_file():
        pytest.fail(f"the OCR model is not in {installed}: run tests/install.sh first")
    return installed


@pytest.fixture(scope="session")
def person(photos, default_model_dir) -> np.ndarray:
    """The person in person.jpg (640x480), cut out along the default model's own box: an
    object the model finds, to move around generated scenes."""
    from streaming.config import Settings
    from streaming.inference.decoders import DecodeOptions
    from streaming.inference.registry import ModelRegistry

    registry = ModelRegistry(Settings(models_dir=default_model_dir))
    try:
        found = registry.get("yolov3-tiny-416").detect(
            load_photo(photos, "person.jpg"), DecodeOptions(confidence=0.5)
        )
    finally:
        registry.close()
    people = found[found.data["class_name"] == "person"]
    x1, y1, x2, y2 = people.xyxy[int(np.argmax(people.confidence))].astype(int)
    return load_photo(photos, "person.jpg")[y1:y2, x1:x2].copy()


@pytest.fixture(scope="session")
def detector(default_model_dir):
    """The default model as a function of an image (its detections at confidence 0.3): what
    the suite's vision-language provider answers from. One call at a time."""
    import threading

    from streaming.config import Settings
    from streaming.inference.decoders import DecodeOptions
    from streaming.inference.registry import ModelRegistry

    registry = ModelRegistry(Settings(models_dir=default_model_dir))
    model = registry.get("yolov3-tiny-416")
    lock = threading.Lock()

    def detect(image):
        with lock:
            return model.detect(image, DecodeOptions(confidence=0.3))

    yield detect
    registry.close()


@pytest.fixture
def vlm_provider(detector):
    """A vision-language provider on loopback (``tests/support/vlm_provider.py``)."""
    from tests.support.vlm_provider import VlmProvider

    with VlmProvider(detector) as provider:
        yield provider


@pytest.fixture(scope="session")
def server():
    with running_server() as process:
        yield process


@pytest.fixture(scope="session")
def guarded_server():
    """API key required, two sessions at most, 3 s to connect; the access log on (a test
    checks that it never shows the key)."""
    with running_server(api_key="s3cret-key", max_sessions="2", connect_timeout_s="3",
                        access_log="true") as process:  # fmt: skip
        yield process


@pytest.fixture
def camera():
    """A real RTSP camera (GStreamer) serving 320x240 stamped frames at 30 fps."""
    with RTSPCamera(320, 240, fps=30) as camera:
        yield camera
