"""QueueWorker: order, bounds, a failing item, and a close that drains or abandons."""

from __future__ import annotations

import threading

from sinks.worker import QueueWorker


def test_items_are_worked_in_order_and_close_drains_what_waits() -> None:
    gate = threading.Event()
    done: list[int] = []

    def work(item: int) -> None:
        gate.wait(10)
        done.append(item)

    worker: QueueWorker[int] = QueueWorker("test", work)
    for item in range(5):
        assert worker.put(item)
    gate.set()
    assert worker.close(timeout_s=10) == 0
    assert done == [0, 1, 2, 3, 4]
    assert not worker.put(5)  # closed: refused
    assert worker.close() == 0  # idempotent


def test_a_full_queue_drops_its_oldest_or_refuses_the_new_one() -> None:
    gate = threading.Event()
    started = {"drop": threading.Event(), "refuse": threading.Event()}
    dropped: list[int] = []

    def work_for(name: str):
        def work(item: int) -> None:
            started[name].set()
            gate.wait(10)

        return work

    dropping: QueueWorker[int] = QueueWorker("drop", work_for("drop"), capacity=2,
                                             drop_oldest=True, on_drop=dropped.append)  # fmt: skip
    refusing: QueueWorker[int] = QueueWorker("refuse", work_for("refuse"), capacity=2)
    for worker in (dropping, refusing):
        worker.put(0)
    # Item 0 is being worked on each: their queues hold only what follows.
    assert all(event.wait(10) for event in started.values())
    assert [dropping.put(i) for i in (1, 2, 3)] == [True, True, True]
    assert dropped == [1]
    assert [refusing.put(i) for i in (1, 2, 3)] == [True, True, False]
    assert dropping.close(abandon=True, timeout_s=0) == 2  # items 2 and 3, still waiting
    gate.set()
    dropping.close(timeout_s=10)
    refusing.close(timeout_s=10)


def test_a_failing_item_is_logged_and_the_next_one_taken(caplog) -> None:
    done: list[int] = []

    def work(item: int) -> None:
        if item == 1:
            raise RuntimeError("bad item")
        done.append(item)

    stopped = threading.Event()
    worker: QueueWorker[int] = QueueWorker("failing", work, on_stop=stopped.set, lazy=True)
    assert worker.thread_id is None  # lazy: no thread until the first item
    for item in range(3):
        worker.put(item)
    worker.close(timeout_s=10)
    assert stopped.is_set()
    assert done == [0, 2]
    assert "an item failed" in caplog.text
