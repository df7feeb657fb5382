"""The ``--replicas auto`` policy's arithmetic: every session held, one replica's room spare."""

from __future__ import annotations

import pytest

from streaming.cluster.autoscale import replicas_for


@pytest.mark.parametrize(
    ("sessions", "limits", "wanted"),
    [
        ({}, {}, 1),  # nothing reported yet: the minimum's one
        ({"a": 0}, {"a": 4}, 1),
        ({"a": 1}, {"a": 4}, 2),
        ({"a": 4, "b": 4}, {"a": 4, "b": 4}, 3),
        ({"a": 3, "b": 2}, {"a": 4, "b": 4}, 3),
        ({"a": 1}, {"a": 1}, 2),
    ],
)
def test_replicas_hold_every_session_and_keep_one_replica_free(sessions, limits, wanted):
    assert replicas_for(sessions, limits) == wanted
