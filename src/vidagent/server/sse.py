"""Server-sent events over an ``EventLog``: each event as ``event:``/``data:`` lines, a comment line as a
keep-alive while nothing happens (so proxies keep the connection and a gone client is noticed)."""

from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator, Callable

from vidagent.server.events import Event, EventLog

KEEPALIVE_S = 10.0
MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def encode(event: Event) -> str:
    return f"event: {event.name}\ndata: {json.dumps(event.data, ensure_ascii=False, default=str)}\n\n"


async def stream(log: EventLog, on_abandon: Callable[[], None] | None = None,
                 keepalive_s: float = KEEPALIVE_S) -> AsyncIterator[str]:
    """The log's events as SSE text until its terminal event. When the stream stops before that (the
    client went away and the response was cancelled), ``on_abandon`` is called."""
    subscription = log.subscribe()
    try:
        while not subscription.ended:
            try:
                event = await asyncio.wait_for(subscription.next(), keepalive_s)
            except asyncio.TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if event is not None:
                yield encode(event)
    finally:
        subscription.close()
        if not subscription.ended and on_abandon is not None:
            on_abandon()
