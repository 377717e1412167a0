"""Events that worker threads publish and request handlers stream: an index job's progress, an ask's steps.

An ``EventLog`` keeps every event it was given, so a late subscriber (a second client watching the same
index job) replays what it missed before it follows live; the log ends with a terminal event.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
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

    async def follow(self) -> AsyncIterator[Event]:
        """Every event so far, then each new one as it comes, until the terminal event."""
        queue: asyncio.Queue[Event] = asyncio.Queue()
        entry = (asyncio.get_running_loop(), queue)
        with self._lock:
            past = list(self._events)
            self._subscribers.append(entry)
        try:
            for event in past:
                yield event
                if event.terminal:
                    return
            while True:
                event = await queue.get()
                yield event
                if event.terminal:
                    return
        finally:
            with self._lock:
                self._subscribers.remove(entry)
