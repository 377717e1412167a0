"""Copies of one model for callers on several threads: each copy serves one caller at a time, and a copy is made
only when the copies made so far are all in use (the first on ``at(0)`` or the first call). Used where one copy
on one thread uses a core better than one copy on all of them (the detector pool, the OCR reader's engines)."""

from __future__ import annotations

import queue
import threading
from contextlib import contextmanager
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class ModelCopies(Generic[T]):
    """Up to ``count`` copies made by ``make``, lent one caller at a time (thread-safe).

    Free copies are lent last in, first out, so calls one at a time keep to the first copy and the next is made
    only when calls overlap.
    """

    def __init__(self, make: Callable[[], T], count: int) -> None:
        if count < 1:
            raise ValueError(f"at least one copy is needed, not {count}")
        self.count = count
        self._make = make
        self._made: list[T] = []
        self._making = threading.Lock()
        self._free: queue.LifoQueue[int] = queue.LifoQueue()
        for slot in reversed(range(count)):
            self._free.put(slot)

    def at(self, slot: int) -> T:
        """The copy in ``slot``, the copies up to it made first."""
        with self._making:
            while len(self._made) <= slot:
                self._made.append(self._make())
            return self._made[slot]

    @contextmanager
    def lent(self) -> Iterator[T]:
        """A free copy, the caller's until the block ends (waits while every copy is lent)."""
        slot = self._free.get()
        try:
            yield self.at(slot)
        finally:
            self._free.put(slot)

    def made(self) -> list[T]:
        """The copies made so far."""
        with self._making:
            return list(self._made)
