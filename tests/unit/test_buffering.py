import asyncio

import pytest

from streaming.buffering import BufferClosed, FrameBuffer
from streaming.peer.ack import AckGate


async def test_latest_keeps_only_the_newest_and_counts_drops():
    buffer = FrameBuffer("latest")
    for i in range(5):
        await buffer.put(i)
    assert buffer.dropped == 4
    assert await buffer.get() == 4


async def test_drop_oldest_is_bounded_fifo():
    buffer = FrameBuffer("drop_oldest", 3)
    evicted = [await buffer.put(i) for i in range(5)]
    assert evicted == [0, 0, 0, 1, 1]
    await buffer.close()
    assert [await buffer.get() for _ in range(4)] == [2, 3, 4, None]


async def test_wait_blocks_the_producer_until_room():
    buffer = FrameBuffer("wait", 1)
    await buffer.put("a")
    blocked = asyncio.create_task(buffer.put("b"))
    await asyncio.sleep(0)  # one loop turn: the put is now parked on the condition
    assert not blocked.done()
    assert await buffer.get() == "a"
    await blocked
    assert await buffer.get() == "b"
    assert buffer.dropped == 0


async def test_close_wakes_everyone_and_rejects_puts():
    buffer = FrameBuffer("wait", 1)
    getter = asyncio.create_task(buffer.get())
    await asyncio.sleep(0)
    await buffer.close()
    assert await getter is None
    with pytest.raises(BufferClosed):
        await buffer.put(1)


async def test_ack_gate_window_and_first_ack_rule():
    gate = AckGate(window=2, enabled=True)
    assert await gate.wait_turn(50)  # no ACK yet: unpaced
    await gate.ack(3)
    assert await gate.wait_turn(5)
    waiting = asyncio.create_task(gate.wait_turn(6))
    await asyncio.sleep(0)
    assert not waiting.done()
    await gate.ack(2)  # ACKs are monotonic: an older one changes nothing
    await asyncio.sleep(0)
    assert not waiting.done()
    await gate.ack(4)
    assert await waiting is True
    late = asyncio.create_task(gate.wait_turn(100))
    await gate.close()
    assert await late is False


async def test_realtime_gate_never_waits():
    gate = AckGate(window=1, enabled=False)
    await gate.ack(1)
    assert await gate.wait_turn(1000)
