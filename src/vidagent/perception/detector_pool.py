"""Several copies of one detector behind one ``ObjectDetector``: the frames of a call are spread
over them, so a detector that runs on one thread (CenterNet: a copy runs one frame at a time on one
onnxruntime thread, which uses a core better than one frame on several) can keep every core busy.

Each copy serves one caller at a time; callers on several threads (two memory stages building
at once) share the copies. Results are the copies' own, in the order of the frames: the pool
changes how fast detection runs, never what it finds.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from vidagent.perception.base import ObjectDetector
from vidagent.perception.copies import ModelCopies

if TYPE_CHECKING:
    import supervision as sv

log = logging.getLogger(__name__)


class DetectorPool:
    """``copies`` detectors made by ``make`` (lazily, on first use), used in parallel.

    A call with ``n`` frames is cut into up to ``copies`` contiguous runs, each detected by
    whichever copy is free next. ``close()`` closes every copy that was made.
    """

    def __init__(self, make: Callable[[], ObjectDetector], copies: int) -> None:
        if copies < 1:
            raise ValueError(f"a detector pool needs at least one copy, not {copies}")
        self.copies = copies
        self._copies = ModelCopies(make, copies)
        # made now: its name identifies the pool's output, and a missing model fails early
        self.name = self._copies.at(0).name
        self._threads = ThreadPoolExecutor(max_workers=copies, thread_name_prefix="detector") if copies > 1 else None

    def _run(self, images: Sequence[np.ndarray]) -> list[sv.Detections]:
        with self._copies.lent() as detector:
            return detector.detect(images)

    def detect(self, images: Sequence[np.ndarray]) -> list[sv.Detections]:
        images = list(images)
        if len(images) <= 1 or self._threads is None:
            return self._run(images) if images else []
        runs = [list(part) for part in np.array_split(np.arange(len(images)), min(self.copies, len(images)))]
        futures = [self._threads.submit(self._run, [images[i] for i in run]) for run in runs]
        results: list[sv.Detections] = []
        for future in futures:
            results += future.result()
        return results

    def close(self) -> None:
        """Close every copy that was made (a copy that holds a worker starts it again on use)."""
        for detector in self._copies.made():
            close = getattr(detector, "close", None)
            if callable(close):
                close()
