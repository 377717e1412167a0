"""Letterboxing: a frame of any aspect ratio fitted into a square model input, and boxes mapped back.

A model with a square input (CenterNet's 512×512) sees the frame resized to fit, centred on black;
``Letterbox`` remembers how, so boxes the model finds in its input become boxes in frame pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from vidagent.video.pixels import fit_side


@dataclass(frozen=True)
class Letterbox:
    """How a frame was fitted into the square model input: ``input = frame * scale + (dx, dy)``."""

    scale: float
    dx: int
    dy: int

    def to_frame(self, boxes: np.ndarray, width: int, height: int) -> np.ndarray:
        """``x1, y1, x2, y2`` boxes in input pixels → float32 boxes in frame pixels, clipped to the
        ``width`` × ``height`` frame."""
        boxes = (np.asarray(boxes, np.float32).reshape(-1, 4)
                 - np.array([self.dx, self.dy, self.dx, self.dy], np.float32)) / self.scale
        boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, width)
        boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, height)
        return boxes


def letterbox(image: np.ndarray, size: int) -> tuple[np.ndarray, Letterbox]:
    """Resize ``image`` (keeping its aspect ratio) into a black ``size``×``size`` canvas, centred."""
    h, w = image.shape[:2]
    scale = size / max(h, w)
    new_w, new_h = fit_side(w, h, size)
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    resized = cv2.resize(image, (new_w, new_h), interpolation=interp)
    canvas = np.zeros((size, size, 3), np.uint8)
    dx, dy = (size - new_w) // 2, (size - new_h) // 2
    canvas[dy:dy + new_h, dx:dx + new_w] = resized
    return canvas, Letterbox(scale, dx, dy)
