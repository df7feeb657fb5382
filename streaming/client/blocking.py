"""WebRTCSession: the blocking API, an AsyncWebRTCSession driven on a loop thread of its own.

The thread starts on first use and is joined by ``close``; its loop (``asyncio.run``) also
shuts down the default executor, so a closed session leaves no thread behind. Data and error
handlers run on that loop thread; frame handlers run on the thread that calls ``run()``.

A program must always be able to end, whatever it does with a session: the loop thread is a
daemon; a session still open when the program ends is closed by an ``atexit`` hook, which
waits for the server's goodbye at most ``_EXIT_CLOSE_S``; a garbage-collected session closes
with the same bound, and never waits at all once the interpreter is finalising (the loop
thread can no longer run then). Ctrl-C cancels whatever the caller's thread was waiting on.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import sys
import threading
import time
import warnings
import weakref
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from .session import AsyncWebRTCSession, Frame, Result, SessionStats, VideoBytes

__all__ = ["WebRTCSession", "pending_signal"]

T = TypeVar("T")

log = logging.getLogger(__name__)

# Closing a session waits for the peer connection's goodbye: usually milliseconds, never
# longer than this; at exit or from a finaliser no longer than the second.
_CLOSE_S = 10.0
_EXIT_CLOSE_S = 2.0
# After Ctrl-C, how long the caller waits for the interrupted call to unwind on the loop.
_CANCEL_WAIT_S = 2.0
# The longest a Ctrl-C that lands just before the caller's thread blocks goes unseen.
_SIGNAL_CHECK_S = 0.25

_open_sessions: weakref.WeakSet[WebRTCSession] = weakref.WeakSet()


class PendingSignal:
    """A signal's exception, kept until its handler's caller takes it.

    Python runs a signal handler on the main thread between two bytecodes, wherever that
    thread is: in a weakref callback or a ``__del__`` too, where an exception is printed as
    "Exception ignored" and lost, and a Ctrl-C or SIGTERM would then go unseen until the
    wait it interrupted ends (for ``wait()``: when the stream does). A handler that notes
    its exception here before raising it has it raised again by the next slice of any
    main-thread wait; whoever catches it takes it, so that the waits of the clean-up that
    follows are not interrupted too. Main thread only, as signal handlers are."""

    def __init__(self) -> None:
        self._error: BaseException | None = None

    def note(self, error: BaseException) -> None:
        self._error = error

    def take(self) -> BaseException | None:
        error, self._error = self._error, None
        return error


pending_signal = PendingSignal()


@atexit.register
def _close_open_sessions() -> None:
    """Sessions a program left open: say goodbye to the server, bounded, before exit."""
    for session in list(_open_sessions):
        session.close(timeout=_EXIT_CLOSE_S)


def _result(future: concurrent.futures.Future[T], timeout: float | None) -> T:
    """``future.result(timeout)``, but on the main thread in slices of ``_SIGNAL_CHECK_S``.

    CPython runs signal handlers only between bytecodes, and a lock wait does not look for
    one that is already pending: a Ctrl-C that lands after the last check and before the
    wait blocks (a window of microseconds, wide on a loaded machine) would go unseen until
    the wait ends, which for ``wait()`` is never. Each slice's return runs it, and each slice
    raises a ``pending_signal`` whose handler's own raise was lost."""
    if threading.current_thread() is not threading.main_thread():
        return future.result(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if (error := pending_signal.take()) is not None:
            raise error
        remaining = _SIGNAL_CHECK_S if deadline is None else deadline - time.monotonic()
        try:
            return future.result(max(0.0, min(remaining, _SIGNAL_CHECK_S)))
        except TimeoutError:
            if future.done():  # the coroutine's own TimeoutError, or it just finished
                return future.result()
            if deadline is not None and time.monotonic() >= deadline:
                raise


def _run_for(future: concurrent.futures.Future[T], coro: Coroutine[Any, Any, T]) -> None:
    """On the loop: runs ``coro`` as a task whose outcome goes to ``future``, and which a
    cancelled ``future`` cancels (or never starts, when cancelled first)."""
    if future.cancelled():
        coro.close()
        return
    task = asyncio.ensure_future(coro)
    loop = task.get_loop()

    def settle(done: asyncio.Future[T]) -> None:
        if done.cancelled():
            future.cancel()
            return
        # The caller's thread may cancel ``future`` at any moment, this one included.
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            if (error := done.exception()) is not None:
                future.set_exception(error)
            else:
                future.set_result(done.result())

    def cancel_task(done: concurrent.futures.Future[T]) -> None:
        if done.cancelled():
            loop.call_soon_threadsafe(task.cancel)

    task.add_done_callback(settle)
    future.add_done_callback(cancel_task)


async def _next(iterator: AsyncGenerator[T, None]) -> T:
    return await anext(iterator)


class _LoopThread:
    """An event loop on a daemon thread, until ``stop``. Holds no reference to the session,
    so a session left open can still be collected (and warn)."""

    def __init__(self, name: str) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self.thread = threading.Thread(target=asyncio.run, args=(self._serve(),), name=name)
        self.thread.daemon = True

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()

    def start(self) -> None:
        self.thread.start()
        self._ready.wait()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Runs ``coro`` on the loop and waits for it; on timeout or an interrupt of the
        waiting thread (Ctrl-C) the coroutine is cancelled, briefly awaited, and the error
        raised here."""
        assert self.loop is not None
        # The future exists before the coroutine is scheduled (asyncio's
        # run_coroutine_threadsafe makes it inside): a Ctrl-C that lands while scheduling
        # still finds a future to cancel, and the coroutine does not run on orphaned.
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            self.loop.call_soon_threadsafe(_run_for, future, coro)
            return _result(future, timeout)
        except BaseException:
            future.cancel()
            with contextlib.suppress(BaseException):
                future.result(_CANCEL_WAIT_S)
            raise

    def stop(self, timeout: float | None = None) -> None:
        """Ends the loop; joins the thread (at most ``timeout`` s) unless called from it."""
        if self.loop is None or self._stop is None or not self.thread.is_alive():
            return
        try:
            self.loop.call_soon_threadsafe(self._stop.set)
        except RuntimeError:  # loop already closed
            return
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout)


class WebRTCSession:
    """Returned by ``client.webrtc.stream(...)``; starts on first use (``run``, ``video``,
    ``results``, ``wait``), closes with ``close`` (idempotent), ``with``, or when ``run`` ends."""

    def __init__(self, core: AsyncWebRTCSession) -> None:
        self._core = core
        self._runner: _LoopThread | None = None
        self._lock = threading.Lock()
        self._closed = False

    # Handlers are registered on the core, which calls them on its loop.
    def on_frame(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        """``handler(frame, metadata)`` for each returned frame, called by ``run()``."""
        return self._core.on_frame(handler)

    def on_data(self, field: str | Callable[..., Any] | None = None) -> Any:
        """``@on_data``, ``@on_data()`` or ``@on_data("name")``; handlers take ``(value)`` or
        ``(value, metadata)``. They run on the session's loop thread: keep them short."""
        return self._core.on_data(field)

    def on_error(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        return self._core.on_error(handler)

    @property
    def source(self) -> Any:
        return self._core.source

    @property
    def stats(self) -> SessionStats:
        return self._core.stats

    def video_bytes(self) -> VideoBytes:
        """Video bytes so far each way; zeros before the session started or once closed.
        Callable from any thread, also while another iterates ``video()``."""
        runner = self._runner
        if runner is None or self._closed:
            return VideoBytes()
        return runner.call(self._core.video_bytes(), _CLOSE_S)

    @property
    def candidate_types(self) -> dict[str, set[str]]:
        return self._core.candidate_types

    @property
    def video_codec(self) -> str | None:
        return self._core.video_codec

    @property
    def termination_reason(self) -> str | None:
        return self._core.termination_reason

    @property
    def completed(self) -> bool:
        """The server said the stream is over; False when the connection was lost first."""
        return self._core.completed

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """Connect now rather than on first use; raises ``SessionStartError`` on failure."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this session is closed")
            if self._runner is not None:
                return
            runner = _LoopThread("visionstream-session")
            runner.start()
            try:
                runner.call(self._core.start())
            except BaseException:
                self._closed = True
                runner.stop(_EXIT_CLOSE_S)
                raise
            self._runner = runner
            _open_sessions.add(self)

    def close(self, timeout: float = _CLOSE_S) -> None:
        """Idempotent. From a handler (on the loop thread) it closes without waiting.

        ``timeout`` bounds the wait for the connection's goodbye; the session is closed
        locally either way."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            runner = self._runner
        _open_sessions.discard(self)
        if runner is None:
            return
        if threading.current_thread() is runner.thread:
            assert runner.loop is not None
            task = runner.loop.create_task(self._core.close())
            task.add_done_callback(lambda _: runner.stop())
            return
        try:
            runner.call(self._core.close(), timeout)
        except (TimeoutError, concurrent.futures.TimeoutError):
            log.warning("the session did not close within %g s; leaving it", timeout)
        finally:
            runner.stop(timeout)

    def __enter__(self) -> WebRTCSession:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_runner", None) is None or self._closed:
            return
        warnings.warn(
            "WebRTCSession was left open; call close() or use 'with'",
            ResourceWarning,
            stacklevel=2,
        )
        if sys.is_finalizing():
            # The loop thread cannot run any more: nothing to wait for (the OS closes it).
            self._closed = True
            return
        self.close(timeout=_EXIT_CLOSE_S)

    def _iterate(self, stream: Callable[[], AsyncGenerator[T, None]]) -> Iterator[T]:
        self.start()
        runner = self._runner
        assert runner is not None
        iterator = stream()
        try:
            while not self._closed:
                try:
                    yield runner.call(_next(iterator))
                except (StopAsyncIteration, concurrent.futures.CancelledError):
                    return
        finally:
            if not self._closed:
                runner.call(iterator.aclose())

    def video(self) -> Iterator[Frame]:
        """``(frame, metadata)`` for each returned frame until the stream ends or ``close``."""
        return self._iterate(self._core.video)

    def results(self) -> Iterator[Result]:
        """``(frame, data, metadata)``, each frame paired with its own result message."""
        return self._iterate(self._core.results)

    def run(self) -> None:
        """Calls the ``on_frame`` handlers for each frame until the stream ends or ``close``
        (from a handler, say) or Ctrl-C; always closes the session."""
        with self:
            for frame, metadata in self.video():
                for handler in self._core.frame_handlers:
                    try:
                        handler(frame, metadata)
                    except Exception:
                        # As inference-sdk: one failing frame does not end the session.
                        log.exception("frame handler %s failed", handler)

    def wait(self, timeout: float | None = None) -> None:
        """Until the stream ends; ``TimeoutError`` after ``timeout`` seconds."""
        self.start()
        assert self._runner is not None
        self._runner.call(self._core.wait(timeout))
