"""Stopping a question's model calls when the question is dropped (issue 55: a client that left an mcts
``n=64, max_depth=50`` question freed the server's model lane only after 62-93 s, the step under way finishing
its 64 draws first).

``stopping_on(event)`` marks the model calls made inside it, in that thread, as belonging to a question that
``event`` cancels; ``check_stop`` raises ``CallStoppedError`` once it is set. ``MeteredChat`` checks before each
call, and the embedded model between the draws of one call and, while it writes a reply, after every token it
streams (``current_stop``), so a dropped question gives its lane back within a token of being dropped. The scope is context-local (a ``ContextVar``), so questions
in other threads are not touched.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from vidagent.errors import LLMError

_STOP: ContextVar[threading.Event | None] = ContextVar("vidagent_llm_stop", default=None)


class CallStoppedError(LLMError):
    """The question a model call was for has been cancelled: the call was not made, or its draws were cut short."""


@contextmanager
def stopping_on(event: threading.Event) -> Iterator[None]:
    """Model calls made inside this block stop (``CallStoppedError``) once ``event`` is set."""
    token = _STOP.set(event)
    try:
        yield
    finally:
        _STOP.reset(token)


def current_stop() -> threading.Event | None:
    """The event that cancels the calls under way (None: they belong to no question that can be cancelled)."""
    return _STOP.get()


def check_stop() -> None:
    """``CallStoppedError`` when the calls under way belong to a question that has been cancelled."""
    event = _STOP.get()
    if event is not None and event.is_set():
        raise CallStoppedError("the question was cancelled: no more model calls are made for it")
