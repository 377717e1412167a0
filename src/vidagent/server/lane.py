"""The model lane: one worker thread that runs every job needing the models, in the order they came.

The embedded LLM, the detector's worker process and the other perception models are not made for
several threads at once, and on a CPU two jobs side by side are no faster than one after the other.
So index builds and questions queue here; HTTP requests, SQL and thumbnails never wait on it.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, TypeVar

from vidagent.server.errors import BusyError

T = TypeVar("T")
log = logging.getLogger(__name__)


class ModelLane:
    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vidagent-models")
        self._lock = threading.Lock()
        self._pending = 0

    @property
    def pending(self) -> int:
        """Jobs submitted and not finished (the one running included)."""
        with self._lock:
            return self._pending

    def submit(self, job: Callable[[], T], *, limit: int | None = None) -> Future[T]:
        """Queue ``job``; its future may be cancelled while it waits (then it never runs). With a
        ``limit``, a ``BusyError`` instead when that many jobs are already pending."""
        with self._lock:
            if limit is not None and self._pending >= limit:
                raise BusyError(f"the server is busy: {self._pending} jobs are queued or running (at most {limit}); "
                                "try again shortly")
            self._pending += 1
        try:
            future = self._executor.submit(job)
        except RuntimeError:  # the lane is closed
            self._finished()
            raise
        future.add_done_callback(lambda _: self._finished())  # run, failed or cancelled alike
        return future

    def _finished(self) -> None:
        with self._lock:
            self._pending -= 1

    def close(self) -> None:
        """Drop the jobs still waiting and wait for the running one to end."""
        self._executor.shutdown(wait=True, cancel_futures=True)
