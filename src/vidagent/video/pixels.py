"""Frame geometry shared by every model that looks at pixels: a size limit and a box's crop."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def fit_side(width: int, height: int, side: float, *, minimum: int = 1) -> tuple[int, int]:
    """``(width, height)`` scaled so that the longer side is ``side``, neither under ``minimum``."""
    scale = side / max(width, height)
    return max(minimum, round(width * scale)), max(minimum, round(height * scale))


def crop_box(image: np.ndarray, box: Sequence[float]) -> np.ndarray:
    """The pixels of ``box`` (x1, y1, x2, y2), widened out to whole pixels and clipped to the image;
    at least one pixel each way."""
    h, w = image.shape[:2]
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    left, top = int(np.clip(math.floor(x1), 0, w - 1)), int(np.clip(math.floor(y1), 0, h - 1))
    right, bottom = int(np.clip(math.ceil(x2), left + 1, w)), int(np.clip(math.ceil(y2), top + 1, h))
    return image[top:bottom, left:right]
