"""Whether a sampled frame shows anything new: a cheap pixel test, no model.

A frame is a near-duplicate of a reference frame when their small greyscale thumbnails differ
little on average *and* in every cell of a coarse grid, so a small object that moves (a ball, a
hand) still counts as a change while sensor noise, compression flicker and a slow fade do not.
Memory stages compare each sampled frame with the last frame they ran their models on (never
with the previous duplicate, so slow drift cannot add up) and reuse that frame's results.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from vidagent.video.pixels import fit_side

THUMBNAIL_SIDE = 64  # pixels on the longer side
GRID = 8  # cells per side of the grid whose every cell must stay alike


@dataclass(frozen=True)
class ChangeLimits:
    """Largest differences (0-255 grey levels) at which two frames still count as the same.

    ``mean``: mean absolute difference over the whole thumbnail; ``cell``: the same in the
    grid cell that changed most.
    """

    mean: float = 2.0
    cell: float = 6.0

    def config(self) -> dict[str, float]:
        return {"mean": self.mean, "cell": self.cell, "thumbnail": THUMBNAIL_SIDE, "grid": GRID}


def thumbnail(image: np.ndarray) -> np.ndarray:
    """A small float32 greyscale copy of an RGB ``uint8`` frame (longer side ``THUMBNAIL_SIDE``)."""
    height, width = image.shape[:2]
    size = fit_side(width, height, THUMBNAIL_SIDE, minimum=GRID)
    grey = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
    return cv2.resize(grey, size, interpolation=cv2.INTER_AREA).astype(np.float32)


def difference(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(mean, largest cell mean) absolute difference between two thumbnails; ``inf`` when their
    shapes differ."""
    if a.shape != b.shape:
        return float("inf"), float("inf")
    diff = np.abs(a - b)
    height, width = diff.shape
    rows = np.array_split(np.arange(height), GRID)
    cols = np.array_split(np.arange(width), GRID)
    cell = max(float(diff[r[0]:r[-1] + 1, c[0]:c[-1] + 1].mean()) for r in rows for c in cols)
    return float(diff.mean()), cell


def same_view(a: np.ndarray, b: np.ndarray, limits: ChangeLimits) -> bool:
    """True when thumbnails ``a`` and ``b`` differ by no more than ``limits``."""
    mean, cell = difference(a, b)
    return mean <= limits.mean and cell <= limits.cell
