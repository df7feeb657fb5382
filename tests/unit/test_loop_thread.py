"""The blocking API's loop thread: a caller blocked on it always sees its Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading

import pytest

from streaming.client import command
from streaming.client.blocking import _LoopThread

WAIT_S = 30.0


def test_a_ctrl_c_that_no_wait_was_woken_for_still_interrupts_the_caller():
    # The race CI hit under load, made certain: the signal's C handler runs on another
    # thread, so it marks the signal pending but wakes no wait of the main thread. Only
    # a wait that returns now and then to run handlers sees it.
    assert threading.current_thread() is threading.main_thread()
    runner = _LoopThread("test-loop")
    runner.start()
    started, cancelled = threading.Event(), threading.Event()

    async def until_cancelled() -> None:
        started.set()
        try:
            # Nothing sets it: only a cancel ends this early (the bound on the bug).
            await asyncio.wait_for(asyncio.Event().wait(), WAIT_S)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    def interrupt_from_elsewhere() -> None:
        if started.wait(WAIT_S):
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    # Python's own Ctrl-C handler, whatever the suite inherited: started in the background
    # by a shell without job control, it runs with SIGINT ignored.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupter = threading.Thread(target=interrupt_from_elsewhere)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.call(until_cancelled())
        # Interrupted while the call was still waiting, which it then cancelled (with the
        # bug, the interrupt surfaced only once the coroutine had returned by itself).
        assert cancelled.wait(WAIT_S)
    finally:
        interrupter.join()
        runner.stop(WAIT_S)
        signal.signal(signal.SIGINT, inherited)
    assert not runner.thread.is_alive()


@pytest.mark.parametrize("timeout", [None, WAIT_S])
def test_the_callers_wait_ends_with_the_coroutines_own_outcome(timeout):
    runner = _LoopThread("test-loop")
    runner.start()

    async def gives_up() -> None:
        raise TimeoutError("the stream did not end within 0.5 s")

    async def answers() -> int:
        return 42

    try:
        with pytest.raises(TimeoutError, match="did not end within"):
            runner.call(gives_up(), timeout)
        assert runner.call(answers(), timeout) == 42
        with pytest.raises(TimeoutError):  # the caller's own bound, longer than a slice
            runner.call(asyncio.Event().wait(), 0.6)
    finally:
        runner.stop(WAIT_S)


_LOST_SIGNAL = """
import asyncio, signal, sys
from streaming.client import command
from streaming.client.blocking import _LoopThread, pending_signal

lost = []
sys.unraisablehook = lambda u: lost.append(type(u.exc_value).__name__)


class SignalledWhileFinalised:
    def __del__(self):
        signal.raise_signal(signal.SIGUSR1)


signal.signal(signal.SIGUSR1, command._interrupt(command._Terminated))
runner = _LoopThread("lost-signal")
runner.start()
SignalledWhileFinalised()  # collected at once: its __del__ loses the raise
assert lost == ["_Terminated"], lost
try:
    runner.call(asyncio.wait_for(asyncio.Event().wait(), 30))
except command._Terminated:
    print("interrupted")
assert pending_signal.take() is None  # raised once, then gone
assert runner.call(asyncio.sleep(0, "after")) == "after"  # clean-up waits run
runner.stop(30)
print("clean")
"""


def test_a_signal_whose_raise_python_discarded_still_interrupts_the_caller():
    # What CI hit: SIGTERM landed while the main thread ran a weakref callback, Python
    # printed "Exception ignored" and dropped the exception, and `stream` ran on to the
    # end of its file. Made certain here: raise_signal runs the handler at once, inside
    # a finaliser, where an exception cannot propagate. In a process of its own: the
    # signal handlers are process-wide, and a finaliser's raise is no business of the
    # suite's process.
    done = subprocess.run([sys.executable, "-c", _LOST_SIGNAL], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["interrupted", "clean"], done.stdout


def test_the_stream_command_prints_no_traceback_for_a_lost_signal(capsys):
    class Unraisable:
        exc_value = command._Terminated()

    command._quiet_lost_signals(Unraisable())
    assert capsys.readouterr().err == ""
