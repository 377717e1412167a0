"""Whether a frame may hold text, before OCR reads it: a pixel test on a downscaled grey frame.

OCR's cost is almost all its text detector at 960 px (measured on the frames the ``frames`` stage
samples from the shared clips: detection alone 0.17-1.2 s a frame on the loaded 2-core machine,
the whole read barely more), whether or not the frame holds text; most video frames hold none.
``TextScreen`` looks for text lines the cheap way: strong edges (morphological gradient) joined
along rows into line-shaped blobs, with a few letter-like crossings along the middle, that stand
on a calmer band above and below (text sits on its background; foliage, grass and tiles are edges
everywhere). A frame with no such blob is not read. It errs towards reading: a false alarm costs
one OCR call, a miss loses text.

``ScreenedTextReader`` puts the screen in front of a ``TextReader`` (the frames stage's describer
reads through it; the OCR tools read every image they are given).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from vidagent.perception.base import TextBox, TextReader, read_texts
from vidagent.video.pixels import fit_side

SCREEN_VERSION = 1  # raise when the test changes, so the stages that read through it rebuild


@dataclass(frozen=True)
class LineTest:
    """One scale of the text-line test and its thresholds.

    ``side``: longer side of the grey frame (pixels); ``gradient``: grey-level step counted as an
    edge; ``join``: width of the row-wise closing that joins letters into a line; ``min_height``:
    lowest line (pixels at ``side``), and ``max_height_share`` the tallest as a share of the frame's
    height; ``min_fill``/``max_fill``: share of edge pixels in the line's box; ``min_solidity``: share
    of the box the joined blob covers; ``calm``: the bands above and below the line (half its height
    each) hold at most this share of the line's edge share; ``min_crossings``: edge runs met along the
    line's middle row. A line is at least 1.2 times as wide as it is high (two letters) and at most
    0.6 of the frame's width.
    """

    side: int = 640
    gradient: int = 60
    join: int = 7
    min_height: int = 5
    max_height_share: float = 1 / 6
    min_fill: float = 0.25
    max_fill: float = 0.85
    min_solidity: float = 0.45
    calm: float = 0.2
    min_crossings: int = 2

    @property
    def name(self) -> str:
        return (f"{self.side}px,g{self.gradient},j{self.join},h{self.min_height}-{self.max_height_share:.3g},"
                f"f{self.min_fill:g}-{self.max_fill:g},s{self.min_solidity:g},c{self.calm:g},x{self.min_crossings}")

    def text_lines(self, grey: np.ndarray) -> list[tuple[int, int, int, int]]:
        """Boxes (x, y, width, height, in pixels of ``grey``) of the line-shaped blobs that may be text."""
        height, width = grey.shape
        size = fit_side(width, height, self.side, minimum=1)
        scale = size[0] / width
        small = cv2.resize(grey, size, interpolation=cv2.INTER_AREA) if size != (width, height) else grey
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
        edges = (cv2.morphologyEx(small, cv2.MORPH_GRADIENT, kernel) >= self.gradient).astype(np.uint8)
        joined = cv2.morphologyEx(edges, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_RECT, (self.join, 1)))
        count, _, stats, _ = cv2.connectedComponentsWithStats(joined, connectivity=8)
        rows, cols = edges.shape
        lines = []
        for x, y, w, h, area in stats[1:count]:
            if h < self.min_height or h > rows * self.max_height_share or w < 1.2 * h or w > cols * 0.6:
                continue
            fill = float(edges[y:y + h, x:x + w].mean())
            if not self.min_fill <= fill <= self.max_fill or area / (w * h) < self.min_solidity:
                continue
            band = max(2, h // 2)
            around = np.concatenate([edges[max(0, y - band):y, x:x + w].ravel(), edges[y + h:y + h + band, x:x + w].ravel()])
            if around.size == 0 or float(around.mean()) > self.calm * fill:
                continue
            middle = edges[y + h // 2, x:x + w].astype(np.int8)
            if int(np.count_nonzero(np.diff(middle) == 1)) < self.min_crossings:
                continue
            lines.append((round(x / scale), round(y / scale), round(w / scale), round(h / scale)))
        return lines


# Large text: letters far apart and thick strokes (outlined by the gradient) at 640 px, joined at 320 px.
LARGE_TEXT = LineTest(side=320, min_height=10, max_height_share=1 / 3, min_fill=0.15, min_solidity=0.3)


@dataclass(frozen=True)
class TextScreen:
    """The text-line test at each of its scales; a frame may hold text when any scale finds a line.

    Chosen on the ``frames`` stage's frames of the 25 shared clips that are not reserved (134 frames;
    15 hold text OCR reads: two watermarks, a caption, a small sail number). At 640 px, gradient 60 and
    calm 0.2 passed every frame with text and skipped 47 of the 119 without (gradient 80 skipped 68 but
    missed the sail number; 480 px missed it at every gradient tried; calm 0.3-0.5 skipped fewer). Text
    drawn large (a letter a quarter of the frame high) escapes that scale, so ``LARGE_TEXT`` looks at
    320 px for lines at least 20 px high at 640: together they skip 37 of the 119, about 3-20 ms a
    frame against 0.2-1 s for OCR.
    """

    scales: tuple[LineTest, ...] = (LineTest(), LARGE_TEXT)

    @property
    def name(self) -> str:
        return f"text-screen-v{SCREEN_VERSION}({';'.join(scale.name for scale in self.scales)})"

    def text_lines(self, image: np.ndarray) -> list[tuple[int, int, int, int]]:
        """Boxes (x, y, width, height, in pixels of ``image``) of the blobs any scale finds line-shaped."""
        grey = _grey(image)
        if min(grey.shape) == 0:
            return []
        return [line for scale in self.scales for line in scale.text_lines(grey)]

    def may_hold_text(self, image: np.ndarray) -> bool:
        """True unless the frame shows nothing shaped like a line of text (the scales in turn)."""
        grey = _grey(image)
        return min(grey.shape) > 0 and any(scale.text_lines(grey) for scale in self.scales)


class ScreenedTextReader:
    """A ``TextReader`` that reads only the images its ``TextScreen`` passes (``[]`` for the others).

    Its ``name`` adds the screen's, so what was read through it is told apart from what was read
    without. ``read_calls`` and ``skipped`` count images read and passed over (thread-safe).
    """

    def __init__(self, reader: TextReader, screen: TextScreen | None = None) -> None:
        self.reader = reader
        self.screen = screen or TextScreen()
        self.name = f"{reader.name}+{self.screen.name}"
        self.read_calls = 0
        self.skipped = 0
        self._lock = threading.Lock()

    def read(self, image: np.ndarray) -> list[TextBox]:
        return self.read_many([image])[0]

    def read_many(self, images: Sequence[np.ndarray]) -> list[list[TextBox]]:
        """The text lines of each image the screen passes (read together, ``read_texts``), ``[]`` for the others."""
        images = list(images)
        passed = [index for index, image in enumerate(images) if self.screen.may_hold_text(image)]
        with self._lock:
            self.read_calls += len(passed)
            self.skipped += len(images) - len(passed)
        out: list[list[TextBox]] = [[] for _ in images]
        for index, boxes in zip(passed, read_texts(self.reader, [images[index] for index in passed])):
            out[index] = boxes
        return out

    def close(self) -> None:
        close = getattr(self.reader, "close", None)
        if callable(close):
            close()


def _grey(image: np.ndarray) -> np.ndarray:
    array = np.asarray(image)
    if array.ndim == 2:
        return np.ascontiguousarray(array, dtype=np.uint8)
    return cv2.cvtColor(np.ascontiguousarray(array[:, :, :3], dtype=np.uint8), cv2.COLOR_RGB2GRAY)
