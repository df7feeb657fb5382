"""The cross-session batcher: each caller gets its own slice; a batch runs at once while the
device is idle, collects while another batch is running (until full, the delay, or the
device frees); a failure fails its batch alone; close finishes what is queued.

The session here holds each run until the test lets it go, so which requests share a batch
follows from what the test did, never from thread timing; the long delays (60 s) only bound
a hang: a test that waited for one would time out."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from streaming.inference.batcher import DynamicBatcher
from streaming.inference.session import InferenceSession, TensorSpec
from tests.support.server import wait_for

LONG_MS = 60_000.0
TIMEOUT = 30


class RowSums(InferenceSession):
    """Each image's pixel sum, so a caller can tell its own result from its neighbours'.
    Each run waits for ``release`` (set it beforehand for runs that go straight through)."""

    backend = "test"
    inputs = [TensorSpec("x", "FP32", (-1, 1))]
    outputs = [TensorSpec("y", "FP32", (-1, 1))]

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[int] = []  # the size of each run, as it began
        self.fail = fail
        self.release = threading.Event()

    @property
    def providers(self) -> list[str]:
        return ["test"]

    def run(self, batch):
        self.batches.append(len(batch))
        assert self.release.wait(TIMEOUT), "the test never let the run go"
        if self.fail:
            raise RuntimeError("device lost")
        return [batch.reshape(len(batch), -1).sum(axis=1, keepdims=True)]


class Callers:
    """Caller threads, one request each (image ``i`` holds the value ``i``)."""

    def __init__(self, batcher: DynamicBatcher) -> None:
        self.batcher = batcher
        self.results: dict[int, tuple] = {}
        self.errors: dict[int, str] = {}
        self.threads: list[threading.Thread] = []

    def start(self, *indices: int) -> None:
        for i in indices:
            thread = threading.Thread(target=self._call, args=(i,))
            thread.start()
            self.threads.append(thread)

    def _call(self, i: int) -> None:
        try:
            self.results[i] = self.batcher.infer(np.full((1, 1), i, np.float32))
        except RuntimeError as exc:
            self.errors[i] = str(exc)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(TIMEOUT)
        assert not any(t.is_alive() for t in self.threads), "a caller is still waiting"


def runs_begun(session: RowSums, count: int) -> None:
    wait_for(lambda: len(session.batches) >= count, TIMEOUT, f"{count} runs begun")


def queued_behind_one(batcher: DynamicBatcher, session: RowSums, first: int, *rest: int) -> Callers:
    """Caller ``first`` running alone (the device held), then ``rest`` queued behind it."""
    callers = Callers(batcher)
    callers.start(first)
    runs_begun(session, 1)
    callers.start(*rest)
    wait_for(lambda: batcher.pending == len(rest), TIMEOUT, f"{len(rest)} queued")
    return callers


def test_each_caller_gets_its_own_slice_of_the_batch_it_shared():
    session, seen = RowSums(), []
    batcher = DynamicBatcher(session, 4, LONG_MS, workers=1, on_batch=lambda n, ms: seen.append(n))
    # The device busy with caller 0 while nine more queue behind it.
    callers = queued_behind_one(batcher, session, 0, *range(1, 10))
    session.release.set()
    callers.join()
    batcher.close()
    batcher.close()  # idempotent
    assert not callers.errors and sorted(callers.results) == list(range(10))
    assert session.batches == [1, 4, 4, 1] and seen == session.batches
    for i, (outputs, _) in callers.results.items():
        assert outputs[0].shape == (1, 1) and outputs[0][0, 0] == i
    shared = sorted(stats.batch_size for _, stats in callers.results.values())
    assert shared == [1, 1] + [4] * 8 and callers.results[0][1].batch_size == 1
    assert not any(t.name.startswith("batcher-") for t in threading.enumerate())


def test_a_lone_request_runs_at_once_whatever_the_delay():
    session = RowSums()
    session.release.set()
    batcher = DynamicBatcher(session, 16, LONG_MS, workers=2)
    callers = Callers(batcher)
    callers.start(7)
    callers.join()  # a 60 s wait for company would outlast the join
    batcher.close()
    ((outputs, stats),) = callers.results.values()
    assert outputs[0][0, 0] == 7 and stats.batch_size == 1 and session.batches == [1]


def test_while_a_batch_runs_the_next_collects_until_it_is_full():
    session = RowSums()
    batcher = DynamicBatcher(session, 3, LONG_MS, workers=2)
    callers = Callers(batcher)
    callers.start(0)
    runs_begun(session, 1)
    callers.start(1, 2, 3)  # the second worker gathers them while the first batch runs
    runs_begun(session, 2)
    session.release.set()
    callers.join()
    batcher.close()
    assert session.batches == [1, 3] and sorted(callers.results) == [0, 1, 2, 3]


def test_a_collecting_batch_goes_as_soon_as_the_device_frees():
    session = RowSums()
    batcher = DynamicBatcher(session, 16, LONG_MS, workers=2)
    callers = queued_behind_one(batcher, session, 0, 1, 2)
    session.release.set()  # the first batch ends: the collecting one runs, two of 16
    callers.join()
    batcher.close()
    assert session.batches == [1, 2] and sorted(callers.results) == [0, 1, 2]


class SegmentationLike(RowSums):
    """Two outputs per image, as a YOLOv8-seg export has (rows and mask prototypes)."""

    outputs = [TensorSpec("rows", "FP32", (-1, 1)), TensorSpec("protos", "FP32", (-1, 2, 3, 3))]

    def run(self, batch):
        (sums,) = super().run(batch)
        return [sums, np.broadcast_to(sums[:, :, None, None], (len(batch), 2, 3, 3)).copy()]


def test_a_batch_of_a_two_output_model_gives_each_caller_its_slice_of_both():
    session = SegmentationLike()
    batcher = DynamicBatcher(session, 3, LONG_MS, workers=1)
    callers = queued_behind_one(batcher, session, 9, 0, 1, 2)
    session.release.set()
    callers.join()
    batcher.close()
    assert not callers.errors and session.batches == [1, 3]
    for i, ((rows, protos), _) in callers.results.items():
        assert rows.shape == (1, 1) and protos.shape == (1, 2, 3, 3)
        assert rows[0, 0] == i and (protos == i).all()


def test_a_failed_batch_fails_each_of_its_callers_and_the_next_batch_runs():
    session = RowSums(fail=True)
    batcher = DynamicBatcher(session, 4, LONG_MS, workers=1)
    callers = queued_behind_one(batcher, session, 0, 1, 2)
    session.release.set()
    callers.join()
    assert not callers.results and set(callers.errors.values()) == {"device lost"}
    assert session.batches == [1, 2]
    session.fail = False
    outputs, _ = batcher.infer(np.full((1, 1), 7, np.float32))
    assert outputs[0][0, 0] == 7
    batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher.infer(np.zeros((1, 1), np.float32))


def test_close_finishes_what_is_queued():
    session = RowSums()
    batcher = DynamicBatcher(session, 2, LONG_MS, workers=1)
    callers = queued_behind_one(batcher, session, 0, 1, 2, 3)
    closing = threading.Thread(target=batcher.close)
    closing.start()  # it waits for the workers, which finish the queue first
    session.release.set()
    closing.join(TIMEOUT)
    callers.join()
    assert not closing.is_alive() and sorted(callers.results) == [0, 1, 2, 3]
    assert session.batches == [1, 2, 1]


def test_the_torch_backend_replays_one_cuda_graph_per_power_of_two():
    """A batch of any size the batcher forms runs on the graph of the next power of two (its
    rows padded), so 1-16 images need five captures, not sixteen (benchmarks/README.md, the
    lent H200)."""
    from streaming.inference.torch_session import graph_batch

    sizes = [graph_batch(rows) for rows in range(1, 17)]
    assert sizes == [1, 2, 4, 4, *[8] * 4, *[16] * 8]
    assert len(set(sizes)) == 5 and graph_batch(17) == 32


def test_every_backend_a_manifest_may_name_is_registered_once():
    """A backend is its module and one line in ``BACKENDS``: manifests and settings take
    exactly the names registered there, and each module opens its sessions with ``opened``."""
    import importlib.util
    from pathlib import Path

    import pydantic
    import pytest

    from streaming.config import Settings
    from streaming.inference.backends import BACKENDS
    from streaming.inference.manifest import ModelManifest

    for module in BACKENDS.values():
        source = importlib.util.find_spec(f"streaming.inference.{module}")
        assert source is not None and source.origin is not None
        assert "\ndef opened(" in Path(source.origin).read_text(), module
    for name in ("auto", *BACKENDS):
        assert Settings(inference_backend=name).inference_backend == name
    with pytest.raises(pydantic.ValidationError, match="unknown backend 'tensorflow': auto, onnx"):
        Settings(inference_backend="tensorflow")
    assert "backend" in ModelManifest.model_fields
