"""A detector that remembers its last results, so stages that look at the same frame in one build
(the describer of ``frames`` and the ``objects`` stage) run the model on it once."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Sequence

import numpy as np

from vidagent.perception.base import Detections, ObjectDetector

DEFAULT_ENTRIES = 64


class CachingDetector:
    """Wraps an ``ObjectDetector``; results are keyed by the image's pixels (BLAKE2b digest).

    It keeps the wrapped detector's ``name``: the cache changes no output, only how often the
    model runs. ``hits`` and ``misses`` count images served from memory and by the model.
    """

    def __init__(self, detector: ObjectDetector, entries: int = DEFAULT_ENTRIES) -> None:
        self.detector = detector
        self.name = detector.name
        self.entries = entries
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[bytes, Detections] = OrderedDict()

    def detect(self, images: Sequence[np.ndarray]) -> list[Detections]:
        keys = [_key(image) for image in images]
        missing = [i for i, key in enumerate(keys) if key not in self._cache]
        fresh = self.detector.detect([images[i] for i in missing]) if missing else []
        found = dict(zip((keys[i] for i in missing), fresh))
        results = []
        for key in keys:
            result = found.get(key)
            if result is None:
                result = self._cache[key]
                self._cache.move_to_end(key)
            results.append(result)
        for key, result in found.items():
            self._cache[key] = result
            while len(self._cache) > self.entries:
                self._cache.popitem(last=False)
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        return results

    def clear(self) -> None:
        """Forget every remembered result."""
        self._cache.clear()

    def close(self) -> None:
        self._cache.clear()
        close = getattr(self.detector, "close", None)
        if callable(close):
            close()


def _key(image: np.ndarray) -> bytes:
    digest = hashlib.blake2b(np.ascontiguousarray(image).data, digest_size=16)
    digest.update(str(image.shape).encode())
    return digest.digest()
