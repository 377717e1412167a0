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
    events = log.follow()
    pending: asyncio.Future[Event] | None = None
    finished = False
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=keepalive_s)
            if not done:
                yield ": keep-alive\n\n"
                continue
            try:
                event = pending.result()
            except StopAsyncIteration:
                finished = True
                return
            pending = None
            yield encode(event)
            if event.terminal:
                finished = True
                return
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
        await events.aclose()
        if not finished and on_abandon is not None:
            on_abandon()
