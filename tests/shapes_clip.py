"""A generated clip with known masks: coloured shapes moving over a textured background.

``frame(t)`` draws the picture at ``t`` seconds and ``truth(t)`` says where each shape is (its exact
mask and box). ``ColourDetector`` is a detector that finds the shapes by their colours (so it finds
them in decoded, lossy frames too) and names them with COCO labels; the segmenters are then judged
by the region similarity J of their masks against the truth. The background is a smooth gradient with
stripes and noise, so a segmenter has to separate the shapes from something, not from a flat colour.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np
import supervision as sv

from vidagent.perception.detections import make_detections
from vidagent.perception.detector import COCO_LABELS

WIDTH, HEIGHT, SECONDS = 320, 240, 4.0


@dataclass(frozen=True)
class Shape:
    name: str
    label: str  # the COCO class the colour detector calls it
    rgb: tuple[int, int, int]


DISC = Shape("disc", "sports ball", (190, 70, 60))
SQUARE = Shape("square", "book", (60, 80, 170))
ELLIPSE = Shape("ellipse", "frisbee", (200, 180, 60))
SHAPES = (DISC, SQUARE, ELLIPSE)


@dataclass(frozen=True)
class Truth:
    shape: Shape
    mask: np.ndarray  # bool (HEIGHT, WIDTH)
    box: tuple[float, float, float, float]  # the tight box, exclusive right and bottom edges


def _background() -> np.ndarray:
    ys, xs = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    base = np.stack([90 + 60 * xs / WIDTH, 120 + 40 * ys / HEIGHT, 100 + 30 * np.sin(xs / 23.0)], axis=-1)
    base += 18 * (((xs + ys) // 16) % 2)[..., None]  # diagonal stripes
    noise = np.random.default_rng(7).normal(0, 10, base.shape)
    return np.clip(base + noise, 0, 255).astype(np.uint8)


_BACKGROUND = _background()


def _masks(t: float) -> dict[str, np.ndarray]:
    """Each shape's mask at ``t`` seconds: the disc moves right, the square down, the ellipse along a
    diagonal, growing; they never overlap."""
    f = t / SECONDS
    out = {}
    disc = np.zeros((HEIGHT, WIDTH), np.uint8)
    cv2.circle(disc, (int(40 + 200 * f), 60), 26, 1, -1)
    out[DISC.name] = disc
    square = np.zeros((HEIGHT, WIDTH), np.uint8)
    top = int(20 + 120 * f)
    cv2.rectangle(square, (250, top), (295, top + 45), 1, -1)
    out[SQUARE.name] = square
    ellipse = np.zeros((HEIGHT, WIDTH), np.uint8)
    cv2.ellipse(ellipse, (int(70 + 80 * f), int(170 + 20 * f)), (int(34 + 10 * f), 20), 20, 0, 360, 1, -1)
    out[ELLIPSE.name] = ellipse
    return {name: mask.astype(bool) for name, mask in out.items()}


def truth(t: float) -> list[Truth]:
    found = []
    for shape in SHAPES:
        mask = _masks(t)[shape.name]
        rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        found.append(Truth(shape, mask, (float(cols[0]), float(rows[0]), float(cols[-1] + 1), float(rows[-1] + 1))))
    return found


def frame(t: float) -> np.ndarray:
    """The RGB picture at ``t`` seconds."""
    image = _BACKGROUND.copy()
    # the shapes are not flat either: lit from the left (a 70-level ramp across each) and grainy
    ys, xs = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    shade = np.random.default_rng(int(t * 1000)).normal(0, 8, image.shape)
    for item in truth(t):
        x1, _, x2, _ = item.box
        light = (35 - 70 * (xs - x1) / max(1.0, x2 - x1))[..., None]
        image[item.mask] = np.clip(np.array(item.shape.rgb) + light[item.mask] + shade[item.mask], 0, 255).astype(np.uint8)
    return image


def write(path: Path, fps: int = 10) -> Path:
    """The clip as an mp4 (H.264 where PyAV has it) of ``SECONDS`` at ``fps``."""
    from conftest import write_test_video

    return write_test_video(path, [frame(i / fps) for i in range(int(SECONDS * fps))], fps=fps)


class ColourDetector:
    """``ObjectDetector`` that finds each shape by its colour (within ``tolerance`` per channel): the box
    of the largest patch of its colour, which is the shape (the background has specks of every colour)."""

    name = "shape-colours"

    def __init__(self, tolerance: int = 45) -> None:
        self.tolerance = tolerance

    def detect(self, images: Sequence[np.ndarray]) -> list[sv.Detections]:
        out = []
        for image in images:
            boxes, labels = [], []
            for shape in SHAPES:
                near = (np.abs(image.astype(np.int16) - np.array(shape.rgb)) <= self.tolerance).all(axis=2)
                near = cv2.morphologyEx(near.astype(np.uint8), cv2.MORPH_OPEN, np.ones((5, 5), np.uint8))
                count, _, stats, _ = cv2.connectedComponentsWithStats(near)
                if count < 2:
                    continue
                best = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))  # the shape; specks of background go
                x, y, w, h, area = stats[best]
                if area < 30:
                    continue
                boxes.append((x, y, x + w, y + h))
                labels.append(shape.label)
            out.append(make_detections(np.array(boxes, np.float32).reshape(-1, 4), [0.9] * len(labels),
                                       [COCO_LABELS.index(label) for label in labels], labels))
        return out
