"""A detector that remembers its last results, so stages that look at the same frame in one build
(the describer of ``frames`` and the ``objects`` stage) run the model on it once."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import TYPE_CHECKING, Sequence

import numpy as np

from vidagent.perception.base import ObjectDetector

if TYPE_CHECKING:
    import supervision as sv

DEFAULT_ENTRIES = 64


class CachingDetector:
    """Wraps an ``ObjectDetector``; results are keyed by the image's pixels (BLAKE2b digest).

    It keeps the wrapped detector's ``name``: the cache changes no output, only how often the
    model runs. ``hits`` and ``misses`` count images served from memory and by the model.
    Thread-safe: when two threads ask for the same frame at once (two stages building in
    parallel), the model runs on it once and the second caller waits for that result. Every caller
    of a frame gets the same ``sv.Detections``: callers add to copies, never change it in place.
    """

    def __init__(self, detector: ObjectDetector, entries: int = DEFAULT_ENTRIES) -> None:
        self.detector = detector
        self.name = detector.name
        self.entries = entries
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[bytes, sv.Detections] = OrderedDict()
        self._running: dict[bytes, Future[sv.Detections]] = {}
        self._lock = threading.Lock()

    def detect(self, images: Sequence[np.ndarray]) -> list[sv.Detections]:
        keys = [_key(image) for image in images]
        mine: dict[bytes, Future[sv.Detections]] = {}
        theirs: dict[bytes, Future[sv.Detections]] = {}
        known: dict[bytes, sv.Detections] = {}
        with self._lock:
            for key in keys:
                if key in known or key in mine or key in theirs:
                    continue
                if key in self._cache:
                    known[key] = self._cache[key]
                    self._cache.move_to_end(key)
                elif key in self._running:
                    theirs[key] = self._running[key]
                else:
                    mine[key] = self._running[key] = Future()
            self.misses += len(mine)
            self.hits += len(keys) - len(mine)
        if mine:
            first = {key: i for i, key in reversed(list(enumerate(keys)))}
            try:
                fresh = self.detector.detect([images[first[key]] for key in mine])
            except BaseException as error:
                with self._lock:
                    for key, future in mine.items():
                        del self._running[key]
                        future.set_exception(error)
                raise
            with self._lock:
                for (key, future), result in zip(mine.items(), fresh):
                    del self._running[key]
                    self._cache[key] = known[key] = result
                    future.set_result(result)
                while len(self._cache) > self.entries:
                    self._cache.popitem(last=False)
        for key, future in theirs.items():
            known[key] = future.result()
        return [known[key] for key in keys]

    def clear(self) -> None:
        """Forget every remembered result."""
        with self._lock:
            self._cache.clear()

    def close(self) -> None:
        self.clear()
        close = getattr(self.detector, "close", None)
        if callable(close):
            close()


def _key(image: np.ndarray) -> bytes:
    digest = hashlib.blake2b(np.ascontiguousarray(image).data, digest_size=16)
    digest.update(str(image.shape).encode())
    return digest.digest()
