"""Oldest-first retention: each limit removes the oldest items, whole, and nothing more."""

from __future__ import annotations

from pathlib import Path

from sinks.retention import Kept, Limits, remove_oldest


def _items(tmp_path: Path, count: int) -> list[Kept]:
    items = []
    for i in range(count):
        paths = (tmp_path / f"{i}.jpg", tmp_path / f"{i}.mp4")
        for path in paths:
            path.write_bytes(b"x" * 10)
        items.append(Kept(made=1000.0 + i, size=20, paths=paths))
    return items


def test_each_limit_removes_the_oldest_whole_items_only(tmp_path: Path) -> None:
    items = _items(tmp_path, 5)
    kept = remove_oldest(items[::-1], Limits(max_items=3), now=1010.0)
    assert [k.made for k in kept] == [1002.0, 1003.0, 1004.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "2.jpg", "2.mp4", "3.jpg", "3.mp4", "4.jpg", "4.mp4",
    ]  # fmt: skip
    kept = remove_oldest(kept, Limits(max_age_s=7.5), now=1010.0)
    assert [k.made for k in kept] == [1003.0, 1004.0]
    kept = remove_oldest(kept, Limits(max_bytes=20), now=1010.0)
    assert [k.made for k in kept] == [1004.0]


def test_a_full_disk_removes_until_it_has_room(tmp_path: Path) -> None:
    items = _items(tmp_path, 3)
    room = iter([True, True, False])
    kept = remove_oldest(items, Limits(too_full=lambda: next(room)))
    assert [k.made for k in kept] == [1002.0]
