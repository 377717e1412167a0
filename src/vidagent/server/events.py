"""Events that worker threads publish and request handlers stream: an index job's progress, an ask's steps.

An ``EventLog`` keeps every event it was given, so a late subscriber (a second client watching the same
index job) replays what it missed before it follows live; the log ends with a terminal event.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

TERMINAL = frozenset({"answer", "done", "error"})


@dataclass(frozen=True)
class Event:
    """One server-sent event: its name and a JSON-ready payload."""

    name: str
    data: dict[str, Any]

    @property
    def terminal(self) -> bool:
        return self.name in TERMINAL


class EventLog:
    """Thread-safe to publish to; read from asyncio with ``follow``."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._subscribers: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[Event]]] = []

    def publish(self, name: str, data: dict[str, Any]) -> None:
        event = Event(name, data)
        with self._lock:
            if self._events and self._events[-1].terminal:
                return  # a log is closed by its first terminal event
            self._events.append(event)
            subscribers = list(self._subscribers)
        for loop, queue in subscribers:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, event)
            except RuntimeError:  # that subscriber's loop has closed
                pass

    @property
    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    @property
    def finished(self) -> bool:
        with self._lock:
            return bool(self._events) and self._events[-1].terminal

    def subscribe(self) -> "Subscription":
        """The events so far, and a queue that receives each later one (on the calling event loop)."""
        subscription = Subscription(self, asyncio.Queue())
        with self._lock:
            subscription.past = list(self._events)
            self._subscribers.append((asyncio.get_running_loop(), subscription.queue))
        return subscription

    def _unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        with self._lock:
            self._subscribers = [(loop, q) for loop, q in self._subscribers if q is not queue]

    async def follow(self) -> AsyncIterator[Event]:
        """Every event so far, then each new one as it comes, until the terminal event."""
        subscription = self.subscribe()
        try:
            async for event in subscription:
                yield event
        finally:
            subscription.close()


@dataclass
class Subscription:
    """One reader of an ``EventLog``: ``next()`` gives the past events, then waits for new ones; after the
    terminal event it gives ``None``. Close it when done (waiting on it may be cancelled at any time)."""

    log: EventLog
    queue: asyncio.Queue[Event]
    past: list[Event] = field(default_factory=list)
    ended: bool = False

    async def next(self) -> Event | None:
        if self.ended:
            return None
        event = self.past.pop(0) if self.past else await self.queue.get()
        self.ended = event.terminal
        return event

    def __aiter__(self) -> "Subscription":
        return self

    async def __anext__(self) -> Event:
        event = await self.next()
        if event is None:
            raise StopAsyncIteration
        return event

    def close(self) -> None:
        self.log._unsubscribe(self.queue)
