"""Even spacing: which few of many items, or which moments of a stretch, stand for the whole.

Three ways of spreading ``limit`` picks over ``count`` items are in use, and each caller keeps its
own because they differ where a pick falls exactly half-way between two items (26 items into 23
picks is the smallest case):
- ``spread_indices``: ends kept, each pick the exact fraction ``i * (count - 1) / (limit - 1)``
  rounded (half to even);
- ``stepped_indices``: ends kept, each pick a multiple of the rounded step ``(count - 1) / (limit - 1)``
  rounded, as numpy's ``linspace`` gives it;
- ``take_every``: the first kept, every ``count / limit``-th item after it, rounded down.

A single pick from the two that keep the ends is the middle item (``count // 2``).
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


def spread_indices(count: int, limit: int) -> list[int]:
    """Indices of ``min(count, limit)`` items spread evenly over ``range(count)``, first and last kept."""
    if count <= limit:
        return list(range(count))
    if limit == 1:
        return [count // 2]
    return [round(i * (count - 1) / (limit - 1)) for i in range(limit)]


def spread_evenly(items: list[T], limit: int) -> list[T]:
    """All items when there are at most ``limit``, else ``limit`` evenly spaced ones (first and last kept)."""
    if len(items) <= limit:
        return items
    return [items[i] for i in spread_indices(len(items), limit)]


def stepped_indices(count: int, limit: int) -> list[int]:
    """Like ``spread_indices``, but each pick a multiple of the rounded step (numpy's ``linspace``)."""
    if count <= limit:
        return list(range(count))
    if limit == 1:
        return [count // 2]
    step = (count - 1) / (limit - 1)
    return [round(i * step) for i in range(limit)]


def take_every(items: Sequence[T], limit: int) -> list[T]:
    """At most ``limit`` items evenly spread over ``items`` (first included), in order."""
    if len(items) <= limit:
        return list(items)
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def midpoints(start_s: float, end_s: float, count: int) -> list[float]:
    """The centres of ``count`` equal parts of ``start_s``-``end_s``."""
    return [start_s + (i + 0.5) * (end_s - start_s) / count for i in range(count)]
