"""``max_fps`` keeps exactly that rate of a faster stream (issue 40): slots on the stream's
own clock, one frame kept per slot whatever the jitter, the grid restarted after a gap or a
jump back. Checked on generated timestamps, each off its place by up to 35 % of a frame
interval (a camera's own timestamps are off by next to nothing; arrival times by more)."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.sampling import RateSampler


def stream(fps: float, seconds: float, jitter: float = 0.0, seed: int = 0) -> list[float]:
    """Frame times of a ``fps`` stream, each late or early by up to ``jitter`` of an interval."""
    rng = random.Random(seed)
    step = 1.0 / fps
    return [i * step + rng.uniform(-jitter, jitter) * step for i in range(int(seconds * fps))]


def kept_rate(sampler: RateSampler, times: list[float]) -> float:
    kept = [t for t in times if sampler.keep(t)]
    return (len(kept) - 1) / (kept[-1] - kept[0])


@pytest.mark.parametrize("source", [5.0, 6.0, 7.5, 12.0, 15.0, 24.0, 25.0, 29.97, 30.0, 60.0])
@pytest.mark.parametrize("jitter", [0.0, 0.2, 0.35])
def test_the_rate_kept_is_max_fps_on_any_faster_source(source, jitter):
    rate = kept_rate(RateSampler(5.0), stream(source, 120, jitter))
    assert rate == pytest.approx(5.0, rel=0.02)


@settings(max_examples=200, deadline=None)
@given(
    target=st.floats(0.5, 30),
    ratio=st.floats(1.0, 12.0),
    jitter=st.floats(0.0, 0.35),
    seed=st.integers(0, 1000),
)
def test_any_target_on_any_faster_jittery_source_is_kept_within_two_percent(
    target, ratio, jitter, seed
):
    source = target * ratio
    times = stream(source, max(60.0, 200 / target), jitter, seed)
    assert kept_rate(RateSampler(target), times) == pytest.approx(target, rel=0.02)


def test_a_slower_source_keeps_every_frame():
    times = stream(3.0, 30, jitter=0.1)
    sampler = RateSampler(5.0)
    assert all(sampler.keep(t) for t in times)


def test_a_gap_or_a_jump_back_restarts_the_grid_without_a_burst():
    sampler = RateSampler(5.0)
    before = [t for t in stream(15.0, 10) if sampler.keep(t)]
    after_gap = [t for t in (30 + t for t in stream(15.0, 10)) if sampler.keep(t)]  # 20 s gap
    after_reset = [t for t in stream(15.0, 10) if sampler.keep(t)]  # a reconnect: time restarts
    for kept in (before, after_gap, after_reset):
        assert len(kept) == 50  # 5 a second, from the first frame on
        assert min(b - a for a, b in itertools.pairwise(kept)) > 0.19


def test_the_achieved_rate_is_reported():
    sampler = RateSampler(5.0)
    assert sampler.achieved is None
    for t in stream(15.0, 10, jitter=0.3):
        sampler.keep(t)
    assert sampler.achieved == pytest.approx(5.0, rel=0.05)
    with pytest.raises(ValueError, match="positive"):
        RateSampler(0)
