import asyncio
import itertools

import pytest

from streaming.buffering import BufferClosed, Consumption, Filling, FrameBuffer
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


async def _fill(buffer: FrameBuffer, items) -> list[int]:
    return [await buffer.put(i) for i in items]


async def _drain(buffer: FrameBuffer) -> list:
    await buffer.close()
    out = []
    while (item := await buffer.get()) is not None:
        out.append(item)
    return out


async def test_drop_latest_keeps_the_early_items():
    buffer = FrameBuffer(Filling.DROP_LATEST, 3)
    assert await _fill(buffer, range(6)) == [0, 0, 0, 1, 1, 1]
    assert await _drain(buffer) == [0, 1, 2]
    assert buffer.drops == {"drop_latest": 3}


async def test_eager_returns_the_newest_and_counts_the_rest():
    buffer = FrameBuffer(Filling.WAIT, 5, Consumption.EAGER)
    await _fill(buffer, range(5))
    assert await buffer.get() == 4
    assert buffer.drops == {"eager": 4}


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_adaptive_sheds_load_while_the_producer_outpaces_the_consumer():
    clock = FakeClock()
    buffer = FrameBuffer(Filling.ADAPTIVE_DROP_OLDEST, 64, clock=clock)
    kept = 0
    for i in range(200):  # 100 items/s in, one taken every 4th: 25/s out
        clock.now = i / 100
        kept += 1 - await buffer.put(i)
        if i % 4 == 0:
            await buffer.get()
    assert buffer.drops["adaptive"] > 50 and "drop_oldest" not in buffer.drops
    assert kept + buffer.drops["adaptive"] == 200
    # Never more than 16 in a row: the consumer still sees a fresh item now and then.
    assert buffer.drops["adaptive"] <= 200 * 16 / 17


async def test_max_fps_drops_early_items_on_live_buffers():
    clock = FakeClock()
    buffer = FrameBuffer(Filling.DROP_OLDEST, 10, max_fps=10, clock=clock)
    taken: list[int] = []

    async def consume() -> None:
        while (item := await buffer.get()) is not None:
            taken.append(item)

    consumer = asyncio.create_task(consume())
    for i in range(40):  # 40 items/s offered for 1 s, 10/s allowed
        clock.now = i / 40
        await buffer.put(i)
        await asyncio.sleep(0)  # one loop turn: the consumer takes it (or drops it)
    await buffer.close()
    await consumer
    assert taken[0] == 0 and 9 <= len(taken) <= 10
    assert all(b - a >= 3 for a, b in itertools.pairwise(taken))
    assert buffer.drops == {"max_fps": 40 - len(taken)}


async def test_max_fps_samples_a_live_stream_by_its_own_timestamps():
    """15 fps stamped frames, arriving in bursts (the clock says nothing of when each was
    taken): exactly 5 a second are kept, by their stamps, before they are buffered."""
    clock = FakeClock()
    buffer = FrameBuffer(Filling.DROP_OLDEST, 100, max_fps=5, clock=clock,
                         timestamp=lambda item: item / 15)  # fmt: skip
    for i in range(15 * 60):  # a minute of frames, put in bursts of 30
        clock.now = (i // 30) * 2.0
        await buffer.put(i)
        if len(buffer) == 100:
            while len(buffer):
                await buffer.get()
    kept = 15 * 60 - buffer.drops["max_fps"]
    assert kept == 5 * 60  # every third frame: 5 a second exactly
    assert buffer.sampler is not None and buffer.sampler.achieved == pytest.approx(5.0)
    # A file (WAIT) is paced where it is read, never sampled.
    assert FrameBuffer(Filling.WAIT, 4, max_fps=5).sampler is None
