"""TaskOwner: named tasks, a failure reported once, close drains then cancels then waits."""

from __future__ import annotations

import asyncio

import pytest

from streaming.tasks import Closer, TaskOwner

WAIT_S = 10.0


async def test_tasks_are_named_after_their_owner():
    owner = TaskOwner("session-ab")
    started = asyncio.Event()

    async def reader() -> None:
        started.set()
        await asyncio.Event().wait()

    task = owner.spawn(reader(), "reader")
    await asyncio.wait_for(started.wait(), WAIT_S)
    assert task is not None and task.get_name() == "session-ab:reader"
    assert len(owner) == 1
    await owner.close()
    assert task.cancelled() and len(owner) == 0


async def test_the_first_failure_is_handed_to_the_owner_once(caplog):
    failures: list[tuple[str, BaseException]] = []
    reported = asyncio.Event()

    def on_failure(name: str, exc: BaseException) -> None:
        failures.append((name, exc))
        reported.set()

    owner = TaskOwner("pipeline-1", on_failure)

    async def broken(message: str) -> None:
        raise RuntimeError(message)

    first = owner.spawn(broken("first"), "process")
    await asyncio.wait_for(reported.wait(), WAIT_S)
    second = owner.spawn(broken("second"), "process")
    await asyncio.gather(first, second, return_exceptions=True)
    assert [(n, str(e)) for n, e in failures] == [("pipeline-1:process", "first")]
    assert str(owner.failure) == "first"
    # Both are logged, with the task's name: nothing fails unseen.
    assert caplog.text.count("task pipeline-1:process failed") == 2
    await owner.close()


async def test_close_lets_tasks_finish_within_the_drain_time_then_cancels_the_rest():
    owner = TaskOwner("x")
    release = asyncio.Event()
    finished: list[str] = []

    async def quick() -> None:
        await release.wait()
        finished.append("quick")

    async def stuck() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            finished.append("stuck cancelled")
            raise

    owner.spawn(quick(), "quick")
    owner.spawn(stuck(), "stuck")
    asyncio.get_running_loop().call_soon(release.set)
    await owner.close(drain_s=1.0)
    assert sorted(finished) == ["quick", "stuck cancelled"]
    assert len(owner) == 0 and owner.closing


async def test_after_close_nothing_new_starts():
    owner = TaskOwner("x")
    await owner.close()
    ran: list[int] = []

    async def work() -> None:
        ran.append(1)

    # Refused and closed at once: there is no task that could run later.
    assert owner.spawn(work(), "work") is None  # closed, never awaited: no warning either
    assert ran == []


async def test_close_from_one_of_its_own_tasks_leaves_that_task_running():
    owner = TaskOwner("x")
    other_cancelled = asyncio.Event()
    done: list[str] = []

    async def other() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            other_cancelled.set()
            raise

    async def closing() -> None:
        await owner.close()
        done.append("closing went on")

    owner.spawn(other(), "other")
    task = owner.spawn(closing(), "closing")
    assert task is not None
    await asyncio.wait_for(task, WAIT_S)
    assert other_cancelled.is_set() and done == ["closing went on"]


async def test_failures_during_close_are_logged_not_reported(caplog):
    failures: list[str] = []
    owner = TaskOwner("x", lambda name, exc: failures.append(name))

    started = asyncio.Event()

    async def fails_when_cancelled() -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            raise RuntimeError("while closing")

    owner.spawn(fails_when_cancelled(), "cleanup")
    await asyncio.wait_for(started.wait(), WAIT_S)  # inside its try: the cancel reaches it
    await owner.close()
    assert failures == [] and "task x:cleanup failed" in caplog.text


async def test_closer_runs_once_and_outlives_the_task_that_asked():
    calls: list[int] = []
    closed = asyncio.Event()

    async def close() -> None:
        calls.append(1)
        closed.set()

    closer = Closer(close, "x:close")

    async def asks_then_ends() -> None:
        closer()
        closer()

    await asyncio.create_task(asks_then_ends())
    await asyncio.wait_for(closed.wait(), WAIT_S)
    assert calls == [1]


@pytest.fixture(autouse=True)
def _log_errors(caplog):
    caplog.set_level("ERROR", logger="streaming.tasks")


async def test_close_waits_a_bounded_time_for_a_task_that_ignores_its_cancellation(caplog):
    caplog.set_level("ERROR", logger="streaming.tasks")
    owner = TaskOwner("x")
    started, cancelled, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def stubborn() -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            await release.wait()  # swallows the cancellation: a bug close must outlive

    task = owner.spawn(stubborn(), "stubborn")
    await started.wait()  # the cancellation lands inside it
    await owner.close(cancel_wait_s=0.2)
    assert cancelled.is_set() and not task.done()
    assert "x:stubborn ignored its cancellation" in caplog.text
    release.set()
    await task
