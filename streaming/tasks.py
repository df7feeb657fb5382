"""TaskOwner: the tasks of one long-lived object (a session, a pipeline, a client session).

asyncio keeps only weak references to tasks and never reads an exception nobody awaits, so a
task that raises would vanish silently and leave its owner half alive (a session holding its
slot until a timeout). Every task of ours is spawned through the owner of the object it
serves: named after it, held until done, and its first unexpected exception is logged and
handed to the owner's ``on_failure`` (which closes the owner, saying why). ``close`` drains,
then cancels, then waits (bounded: a task that swallows its cancellation is logged and left
behind rather than holding its owner's close forever), as uvicorn's ``Server.shutdown`` does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["Closer", "TaskOwner"]

log = logging.getLogger(__name__)

CANCEL_WAIT_S = 10.0
"""How long ``close`` waits for cancelled tasks to end: a task stuck in a blocking call that
ignores cancellation cannot hold a session's or a server's close."""

FailureHandler = Callable[[str, BaseException], None]
"""Called on the loop with the failed task's name and its exception, once per owner."""


class TaskOwner:
    """Spawns, holds and ends the tasks of one object named ``owner``."""

    def __init__(self, owner: str, on_failure: FailureHandler | None = None) -> None:
        self.owner = owner
        self._on_failure = on_failure
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self.failure: BaseException | None = None
        """The first unexpected exception of one of the tasks, if any."""

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def closing(self) -> bool:
        return self._closing

    def spawn(
        self, coro: Coroutine[Any, Any, Any], name: str | None = None
    ) -> asyncio.Task[Any] | None:
        """Run ``coro`` as ``<owner>:<name>`` (by default its function's name); after
        ``close`` began it is not started."""
        name = name or getattr(coro, "__name__", "task")
        if self._closing:
            coro.close()
            return None
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.owner}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        log.error("task %s failed", task.get_name(), exc_info=exc)
        if self.failure is None and not self._closing:
            self.failure = exc
            if self._on_failure is not None:
                self._on_failure(task.get_name(), exc)

    async def close(self, drain_s: float = 0.0, cancel_wait_s: float = CANCEL_WAIT_S) -> None:
        """Wait up to ``drain_s`` for the tasks to finish, cancel those still running, and
        wait up to ``cancel_wait_s`` for them to end. Idempotent; safe from one of the
        owner's own tasks (which is left to finish by itself)."""
        self._closing = True
        current = asyncio.current_task()
        others = [t for t in self._tasks if t is not current]
        if others and drain_s > 0:
            await asyncio.wait(others, timeout=drain_s)
        for task in others:
            task.cancel()
        if not others:
            return
        _, stuck = await asyncio.wait(others, timeout=cancel_wait_s)
        for task in stuck:
            log.error(
                "task %s ignored its cancellation for %g s; left behind",
                task.get_name(),
                cancel_wait_s,
            )


class Closer:
    """Runs an owner's ``close`` as a task of its own, held until done: the close must
    outlive the task that asked for it (which ``close`` cancels)."""

    def __init__(self, close: Callable[[], Coroutine[Any, Any, Any]], name: str) -> None:
        self._close = close
        self._name = name
        self._task: asyncio.Task[Any] | None = None

    def __call__(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._close(), name=self._name)
