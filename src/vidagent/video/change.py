"""Whether a sampled frame shows anything new: a cheap pixel test, no model.

A frame is a near-duplicate of a reference frame when their small greyscale thumbnails differ
little on average *and* in every cell of a coarse grid, so a small object that moves (a ball, a
hand) still counts as a change while sensor noise, compression flicker and a slow fade do not.
Memory stages compare each sampled frame with the last frame they ran their models on (never
with the previous duplicate, so slow drift cannot add up) and reuse that frame's results.

A stage that follows change (``SparseRate``) also reuses the result of a frame that changed a little
more than that, as long as the frame its models last ran on is recent: its models run at the full
sampling rate where the picture moves and at ``1 / max_gap_s`` where it stays still.
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
    sparse: SparseRate | None = None  # also reuse frames that stay still for a while (None: never)

    def config(self) -> dict[str, object]:
        config: dict[str, object] = {"mean": self.mean, "cell": self.cell, "thumbnail": THUMBNAIL_SIDE, "grid": GRID}
        if self.sparse is not None:  # absent otherwise, so stages built without it stay valid
            config["sparse"] = {"mean": self.sparse.mean, "cell": self.sparse.cell, "max_gap_s": self.sparse.max_gap_s}
        return config


@dataclass(frozen=True)
class SparseRate:
    """Where the picture stays still, a stage's models run once every ``max_gap_s`` seconds.

    A frame within ``max_gap_s`` of the last frame the models ran on reuses that frame's result when
    their thumbnails differ by at most ``mean`` on average and ``cell`` in the grid cell that changed
    most (looser than a near-duplicate, since the gap is bounded). Measured on the objects stage's
    frames (2 per second) of the 25 shared clips that are not reserved, against their last detected
    frame: a near-duplicate (2, 6) reuses 7 of 537 frames, (4, 12) within 1 s 20, (6, 18) 30, (8, 24)
    32; these clips move throughout (hand-held cameras, people in action), so the gain is in videos with
    still stretches. With these limits the objects stage kept the objects, tracks and categories of all 25
    (``bench/less_work.py``: 17 of 546 detector frames saved), but on a reserved clip (robustness only) an
    object seen briefly was lost with a frame reused: ``Settings.detector_follows_change`` is off by default.
    """

    mean: float = 6.0
    cell: float = 18.0
    max_gap_s: float = 1.0


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
    """True when thumbnails ``a`` and ``b`` differ by no more than ``limits`` (its near-duplicate test)."""
    mean, cell = difference(a, b)
    return mean <= limits.mean and cell <= limits.cell


def reuses(key: np.ndarray, frame: np.ndarray, gap_s: float, limits: ChangeLimits) -> bool:
    """True when a frame (thumbnail ``frame``) ``gap_s`` seconds after the frame the models last ran
    on (thumbnail ``key``) may reuse that frame's result: it is a near-duplicate, or ``limits.sparse``
    allows it this soon after."""
    mean, cell = difference(key, frame)
    if mean <= limits.mean and cell <= limits.cell:
        return True
    sparse = limits.sparse
    return sparse is not None and gap_s < sparse.max_gap_s - 1e-9 and mean <= sparse.mean and cell <= sparse.cell
