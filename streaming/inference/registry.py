"""Model registry: each model is loaded once per process and shared by every session."""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..config import Settings
from ..errors import Conflict, InvalidRequest, ModelError
from ..metrics import Metrics
from .aliases import names_for
from .backends import SessionOpener, batch_size_for, choose_backend, open_session
from .batcher import DynamicBatcher
from .manifest import MANIFEST_FILE, MODEL_NAME, ModelManifest
from .model import DetectionModel
from .ocr import TextReader, charset_of
from .session import InferenceSession

__all__ = ["InvalidModelId", "ModelInUse", "ModelRegistry", "UnknownModel", "check_model_id"]

log = logging.getLogger(__name__)


class UnknownModel(KeyError):
    """No manifest in the models directory has this name."""


class InvalidModelId(InvalidRequest):
    """A model id no model could have: too long, or with characters ids never have (400)."""

    code = "invalid_model_id"


# Our names, and the reference's platform ids (``workspace/project/3``, ``coco/3``).
# Each part starts with a letter or digit: no part is '.' or '..'.
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(?:/[A-Za-z0-9][A-Za-z0-9_.-]*){0,2}")
_MODEL_ID_MAX = 256


def check_model_id(model_id: str) -> None:
    """Raises ``InvalidModelId`` for an id no model could have, before it reaches a path."""
    if len(model_id) > _MODEL_ID_MAX or not _MODEL_ID.fullmatch(model_id):
        shown = model_id if len(model_id) <= 64 else f"{model_id[:64]}... ({len(model_id)} chars)"
        raise InvalidModelId(
            f"model id {shown!r} is not a model id: at most {_MODEL_ID_MAX} characters of "
            "letters, digits, '.', '_' and '-', in up to three parts split by '/'"
        )


class ModelInUse(Conflict):
    """A model some running workflow holds cannot be unloaded (409)."""


def _runs_variants(session: InferenceSession) -> bool:
    """Input variants pay on a CPU, where a frame's cost is its pixels. On an accelerator
    they would split its batches by shape, and a remote server or a Ray model deployment
    serves one network."""
    return session.backend in ("onnxruntime", "openvino") and not session.on_accelerator


class ModelRegistry:
    """The server's models by id: prepared, loaded once, warmed up, shared by every session
    and pipeline (through a batcher where batching pays).

    What runs a model holds a lease on it (``acquire`` ... ``release``, or ``lease``): a
    compiled workflow's model blocks from build to close, an HTTP inference for its request.
    ``unload`` refuses a leased model, so nothing running loses its model underneath it."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics | None = None,
        opener: SessionOpener = open_session,
    ) -> None:
        """``opener`` runs a model (default: the backend its manifest or the settings name;
        the Ray deployment's can send it to a model deployment)."""
        self._open = opener
        self._dir = Path(settings.models_dir)
        self._settings = settings
        self._metrics = metrics
        self._models: dict[str, DetectionModel] = {}
        self._leases: Counter[str] = Counter()
        self._lock = threading.Lock()

    def available(self) -> list[str]:
        if not self._dir.is_dir():
            return []
        return sorted(p.parent.name for p in self._dir.glob(f"*/{MANIFEST_FILE}"))

    def loaded(self) -> dict[str, DetectionModel]:
        return dict(self._models)

    def acquire(self, model_id: str) -> DetectionModel:
        """``get``, leased until ``release(model.name)``: not unloaded meanwhile."""
        model_id = self.resolve(model_id)
        with self._lock:
            self._leases[model_id] += 1
        try:
            return self.get(model_id)
        except BaseException:
            self.release(model_id)
            raise

    def release(self, model_id: str) -> None:
        """Returns a lease ``acquire`` gave on the model named ``model_id`` (its ``name``)."""
        with self._lock:
            self._leases[model_id] -= 1
            if self._leases[model_id] <= 0:
                del self._leases[model_id]

    @contextmanager
    def lease(self, model_id: str) -> Iterator[DetectionModel]:
        """The model for the ``with`` block (blocking on entry: off the event loop)."""
        model = self.acquire(model_id)
        try:
            yield model
        finally:
            self.release(model.name)

    def unload(self, model_id: str) -> bool:
        """Closes a loaded model nothing holds; False when it was not loaded. Raises
        ``ModelInUse`` while a workflow or request holds it. Blocking (it joins the
        model's batcher): off the event loop."""
        model_id = next((n for n in names_for(model_id) if n in self._models), model_id)
        with self._lock:
            if self._leases[model_id] > 0:
                raise ModelInUse(
                    f"model '{model_id}' is in use by {self._leases[model_id]} running "
                    "workflow(s) or request(s); end its sessions and pipelines first"
                )
            model = self._models.pop(model_id, None)
        if model is None:
            return False
        model.close()
        log.info("unloaded model %s", model_id)
        return True

    def unload_idle(self) -> list[str]:
        """Unloads every model nothing holds; returns the ids of those still loaded."""
        with self._lock:
            idle = [m for m in self._models if self._leases[m] <= 0]
            models = [self._models.pop(m) for m in idle]
        for model in models:
            model.close()
        if idle:
            log.info("unloaded models %s", ", ".join(idle))
        return sorted(self._models)

    def resolve(self, model_id: str) -> str:
        """The id ``model_id`` is served under here: itself, or the reference's other name
        for it (``coco/3`` -> ``yolov8n-640``); ``UnknownModel`` when none is, and
        ``InvalidModelId`` for an id no model could have."""
        check_model_id(model_id)
        for name in names_for(model_id):
            if name in self._models or (
                MODEL_NAME.fullmatch(name) and (self._dir / name / MANIFEST_FILE).is_file()
            ):
                return name
        raise UnknownModel(model_id)

    def get(self, model_id: str) -> DetectionModel:
        """Load on first use (blocking: call it off the event loop). Unleased: for a
        moment's use that may fail if the model is unloaded meanwhile (warming up)."""
        model = self._models.get(model_id)
        if model is not None:
            return model
        model_id = self.resolve(model_id)
        with self._lock:
            model = self._models.get(model_id)
            if model is not None:
                return model
            directory = self._dir / model_id
            try:
                model = self._load(directory)
            except ModelError:
                raise
            except Exception as exc:
                raise ModelError(f"model '{model_id}' failed to load: {exc}") from exc
            log.info(
                "loaded model %s on %s (%s; inputs %s; batches up to %d)%s",
                model_id,
                model.session.device,
                model.session.backend,
                ", ".join(f"{w}x{h}" for w, h in (n.size for n in model.inputs)) or "any size",
                model.batcher.max_batch_size,
                f"; DEGRADED: {model.session.degraded}" if model.session.degraded else "",
            )
            if self._metrics is not None:
                self._metrics.observe_model(model)
            self._models[model_id] = model
            return model

    def describe(self) -> list[dict]:
        """Every model in the directory: what it is, and where it runs once loaded."""
        out: list[dict] = []
        for name in self.available():
            try:
                manifest = ModelManifest.load(self._dir / name)
            except ValueError as exc:
                out.append({"name": name, "error": f"unreadable manifest: {exc}"})
                continue
            entry: dict[str, object] = {
                "name": name,
                "version": manifest.version,
                "task": manifest.task,
                "decoder": manifest.decoder,
                "input_size": [manifest.input_width, manifest.input_height],
                "classes": manifest.class_names,
                "loaded": False,
                "backend": choose_backend(manifest, self._settings),
            }
            model = self._models.get(name)
            if model is not None:
                session = model.session
                entry |= {
                    "loaded": True,
                    "backend": session.backend,
                    "device": session.device,
                    "providers": session.providers,
                    "degraded": session.degraded,
                    "max_batch_size": model.batcher.max_batch_size,
                    "input_sizes": [list(n.size) for n in model.inputs],
                }
            out.append(entry)
        return out

    def _load(self, directory: Path) -> DetectionModel:
        # The directory is the model's id here (what leases and listings use), whatever
        # name a hand-edited manifest gives.
        manifest = ModelManifest.load(directory).model_copy(update={"name": directory.name})
        if manifest.task == "ocr":
            return self._load_reader(manifest, directory)
        batchers: list[DynamicBatcher] = []

        def opened(shaped: ModelManifest) -> DynamicBatcher:
            session = self._open(shaped, directory, self._settings)
            try:
                batchers.append(self._batcher(shaped, session))
            except BaseException:
                session.close()
                raise
            return batchers[-1]

        try:
            main = opened(manifest)
            wanted = self._settings.input_variants and _runs_variants(main.session)
            shapes = map(manifest.at_input, manifest.input_variants if wanted else [])
            variants = [(shaped, opened(shaped)) for shaped in shapes]
            model = DetectionModel(manifest, main.session, main, variants)
            model.warm_up()
        except BaseException:
            for batcher in batchers:
                batcher.close()
                batcher.session.close()
            raise
        return model

    def _batcher(self, manifest: ModelManifest, session: InferenceSession) -> DynamicBatcher:
        return DynamicBatcher(
            session,
            batch_size_for(manifest, session, self._settings),
            self._settings.max_queue_delay_ms,
            self._settings.batch_workers,
            on_batch=(
                functools.partial(self._metrics.observe_batch, manifest.name)
                if self._metrics
                else None
            ),
            name=f"{manifest.name}-{manifest.input_width}x{manifest.input_height}",
            request_batch=self._settings.max_crop_batch,
        )

    def _load_reader(self, manifest: ModelManifest, directory: Path) -> TextReader:
        """An OCR model: its detector as the session, its recogniser and angle classifier as
        parts, each on the runtime the settings choose."""
        opened: list[InferenceSession] = []

        def part(role: str) -> InferenceSession:
            file = manifest.parts.get(role)
            if file is None:
                raise ModelError(f"model '{manifest.name}' lacks its {role} (manifest 'parts')")
            opened.append(
                self._open(manifest.model_copy(update={"file": file}), directory, self._settings)
            )
            return opened[-1]

        try:
            opened.append(self._open(manifest, directory, self._settings))
            angle = part("angle") if "angle" in manifest.parts else None
            recogniser = part("recognizer")
            # Regions per recognition run: as any model's batches (on a CPU one at a time:
            # measured 10-17 % faster than padded batches, benchmarks two-stage).
            chunk = min(
                batch_size_for(manifest, recogniser, self._settings), self._settings.max_crop_batch
            )
            reader = TextReader(
                manifest, opened[0], recogniser, angle, charset_of(directory, manifest), chunk
            )
            reader.warm_up()
        except BaseException:
            for session in opened:
                session.close()
            raise
        return reader

    def close(self) -> None:
        with self._lock:
            for model in self._models.values():
                model.close()
            self._models.clear()
