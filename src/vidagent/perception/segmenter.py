"""Offline object masks: OpenCV's GrabCut seeded by each box, and a person model where one is installed.

``GrabCutSegmenter`` cuts each box's region out of the frame (grown by ``PAD`` so GrabCut sees the
background around the object), shrinks it to at most ``max_side`` pixels a side (GrabCut's cost grows
with the pixels it models: a 300x400 person box took 350 ms at full size), runs GrabCut initialised with
the box as the "probably foreground" rectangle, and scales the foreground back. OpenCV's random generator
is seeded before each cut, so a frame always gets the same masks. A box too small to model, or a cut that
keeps almost nothing of it, gets the box itself as its mask: a box is a better guess than no pixels.

``OfflineSegmenter`` routes people to a person segmenter (``vidagent.perception.selfie``: MediaPipe's selfie
segmentation from the npm package the detector comes from) when one is given, and everything else, and
any person it finds nothing in, to GrabCut.

``build_segmenter`` makes the segmenter a setting names (``BackendSettings.segmenter``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from vidagent.perception.base import Segmenter
from vidagent.perception.masks import box_mask

log = logging.getLogger(__name__)

# The region GrabCut sees: the box grown by this share of its longer side on each side (on a real frame, a white
# dog on grey paving, 0.05 and 0.1 kept 27 % of its box, 0.15 and 0.3 let the paving's model swallow it) ...
PAD = 0.1
MIN_PAD_PIXELS = 4  # ... and by at least this many pixels
# GrabCut's region is shrunk to this many pixels a side at most. On the generated test clip (tests/shapes_clip.py,
# boxes loosened as a detector's are) J was 0.988 at 96 and 0.991 at 128 and at 160 (the box itself: 0.647),
# 6 ms a box at 128; at full size a 300x400 person box of a real frame took 350 ms.
DEFAULT_MAX_SIDE = 128
# 1, 3 and 5 iterations gave the same J on the generated clip (3.4, 6.0, 8.6 ms a box). On real frames, where
# no mask is known, GrabCut's masks of 79 people in the shared clips were scored against the person model's
# (``bench/mask_quality.py --people``): one iteration agreed better (mean IoU 0.605 against 0.566 with three;
# the box itself 0.493) at half the cost (14 against 27 ms a person box): later iterations let the background's
# model take in more of the object.
DEFAULT_ITERATIONS = 1
MIN_MODEL_SIDE = 6  # boxes thinner than this (in GrabCut's shrunk pixels) keep their box as the mask
# A mask covering less of its box than this is taken for a failed cut (a thin bat on a busy background).
MIN_FILL = 0.05
PERSON_LABELS = frozenset({"person"})
# People whose box is shorter than this on its longer side go to GrabCut too: the person model costs 40 ms a
# person whatever the size (its input is 256x256), and in boats.mp4 171 of 256 detections are people a few
# dozen pixels high on the decks. How well either masks people that small was not measured.
MIN_PERSON_SIDE = 48
NO_MASKS, GRABCUT = "none", "grabcut"  # the settings that turn masks off, and that use GrabCut for people too


@dataclass(frozen=True)
class PendingCut:
    """A GrabCut made ready and not run yet (``GrabCutSegmenter.prepare``): the box's region of the frame, shrunk
    as GrabCut models it, and where its mask goes. A few kilobytes, where the frame is hundreds."""

    region: np.ndarray  # RGB uint8, at most max_side pixels a side
    rect: tuple[int, int, int, int]  # the box in ``region`` (x, y, w, h)
    placement: tuple[int, int, int, int]  # the region in the frame (left, top, right, bottom)
    frame_size: tuple[int, int]  # width, height
    box: tuple[float, float, float, float]

    @property
    def nbytes(self) -> int:
        return int(self.region.nbytes)


class GrabCutSegmenter:
    """Box-seeded GrabCut (OpenCV) for any object; implements ``Segmenter``. ``prepare`` and ``complete`` split a
    cut in two, so a caller can keep what a cut needs instead of the frame and run it only if the mask is wanted."""

    def __init__(self, *, max_side: int = DEFAULT_MAX_SIDE, iterations: int = DEFAULT_ITERATIONS) -> None:
        if max_side < 16 or iterations < 1:
            raise ValueError("GrabCut needs max_side >= 16 and at least one iteration")
        self.max_side = int(max_side)
        self.iterations = int(iterations)
        self.name = f"grabcut?max_side={self.max_side}&iterations={self.iterations}"

    def segment(self, image: np.ndarray, boxes: Sequence[Sequence[float]], labels: Sequence[str]) -> list[np.ndarray]:
        frame = np.ascontiguousarray(image[..., :3], dtype=np.uint8)
        return [self.segment_box(frame, box) for box in boxes]

    def segment_box(self, image: np.ndarray, box: Sequence[float]) -> np.ndarray:
        """The mask of the object in ``box`` (x1, y1, x2, y2 pixels of the RGB ``image``)."""
        cut = self.prepare(image, box)
        return cut if isinstance(cut, np.ndarray) else self.complete(cut)

    def prepare(self, image: np.ndarray, box: Sequence[float]) -> PendingCut | np.ndarray:
        """What ``complete`` needs to cut ``box`` out of ``image`` later (the frame need not be kept), or the
        mask itself where there is nothing to model (the box, for a box too small)."""
        height, width = image.shape[:2]
        x1, y1, x2, y2 = (float(v) for v in box[:4])
        pad = max(MIN_PAD_PIXELS, PAD * max(x2 - x1, y2 - y1))
        left, top = max(0, math.floor(x1 - pad)), max(0, math.floor(y1 - pad))
        right, bottom = min(width, math.ceil(x2 + pad)), min(height, math.ceil(y2 + pad))
        if right - left < 2 or bottom - top < 2:
            return box_mask(box, width, height)
        scale = min(1.0, self.max_side / max(right - left, bottom - top))
        region = image[top:bottom, left:right]
        small = region if scale == 1.0 else cv2.resize(region, (max(2, round((right - left) * scale)),
                                                                 max(2, round((bottom - top) * scale))),
                                                       interpolation=cv2.INTER_AREA)
        rect = _rect_in(small.shape, ((x1 - left) * scale, (y1 - top) * scale, (x2 - left) * scale,
                                      (y2 - top) * scale))
        if rect is None:
            return box_mask(box, width, height)
        return PendingCut(np.array(small[..., :3], dtype=np.uint8, copy=True), rect, (left, top, right, bottom),
                          (width, height), (x1, y1, x2, y2))

    def complete(self, cut: PendingCut) -> np.ndarray:
        """The mask ``prepare`` made ``cut`` for."""
        width, height = cut.frame_size
        left, top, right, bottom = cut.placement
        whole_box = box_mask(cut.box, width, height)
        foreground = self._cut(cut.region, cut.rect)
        if foreground is None:
            return whole_box
        if foreground.shape != (bottom - top, right - left):
            foreground = cv2.resize(foreground, (right - left, bottom - top), interpolation=cv2.INTER_LINEAR)
        mask = np.zeros((height, width), bool)
        mask[top:bottom, left:right] = foreground > 127
        mask &= whole_box
        if mask.sum() < MIN_FILL * max(1, int(whole_box.sum())):
            return whole_box
        return mask

    def _cut(self, region: np.ndarray, rect: tuple[int, int, int, int]) -> np.ndarray | None:
        """GrabCut's foreground (0/255) of the RGB ``region`` around ``rect``, one iteration at a time: an
        iteration that leaves less than ``MIN_FILL`` of the rectangle (the model of the object swallowed
        by a background of its colours) is undone and the cut stops there. None when even the first does."""
        labels = np.zeros(region.shape[:2], np.uint8)
        background, foreground = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
        bgr = cv2.cvtColor(region, cv2.COLOR_RGB2BGR)
        least = MIN_FILL * rect[2] * rect[3]
        kept: np.ndarray | None = None
        cv2.setRNGSeed(0)  # GrabCut's k-means starts from OpenCV's generator: the same masks every run
        for iteration in range(self.iterations):
            try:
                cv2.grabCut(bgr, labels, rect, background, foreground, 1,
                            cv2.GC_INIT_WITH_RECT if iteration == 0 else cv2.GC_EVAL)
            except cv2.error as exc:  # a region of one colour has no background model to learn
                log.debug("GrabCut failed on a %dx%d region (%s)", region.shape[1], region.shape[0], exc)
                break
            cut = (labels == cv2.GC_FGD) | (labels == cv2.GC_PR_FGD)
            if cut.sum() < least:
                break
            kept = cut.astype(np.uint8) * 255
        return kept


def _longer_side(box: Sequence[float]) -> float:
    return max(float(box[2]) - float(box[0]), float(box[3]) - float(box[1]))


def _rect_in(shape: tuple[int, ...], box: tuple[float, float, float, float]) -> tuple[int, int, int, int] | None:
    """GrabCut's (x, y, w, h) rectangle for ``box`` inside an image of ``shape``; None when too small."""
    height, width = shape[:2]
    x = int(np.clip(math.floor(box[0]), 0, width - 1))
    y = int(np.clip(math.floor(box[1]), 0, height - 1))
    w = int(np.clip(math.ceil(box[2]), x + 1, width)) - x
    h = int(np.clip(math.ceil(box[3]), y + 1, height)) - y
    if w < MIN_MODEL_SIDE or h < MIN_MODEL_SIDE or (w >= width and h >= height):
        return None
    return x, y, w, h


class OfflineSegmenter:
    """People to ``person`` (when given), the rest to ``things``; implements ``Segmenter``.

    A person mask that covers less than ``MIN_FILL`` of its box (the person model saw no one there:
    a back turned in the dark) is made by ``things`` instead, and so is a person whose box is under
    ``MIN_PERSON_SIDE`` pixels on its longer side.
    """

    def __init__(self, things: Segmenter, person: Segmenter | None = None) -> None:
        self.things = things
        self.person = person
        self.name = f"{person.name}&min_side={MIN_PERSON_SIDE}+{things.name}" if person is not None else things.name

    def segment(self, image: np.ndarray, boxes: Sequence[Sequence[float]], labels: Sequence[str]) -> list[np.ndarray]:
        return [self.complete(mask) if isinstance(mask, PendingCut) else mask
                for mask in self.segment_later(image, boxes, labels, [False] * len(boxes))]

    def segment_later(self, image: np.ndarray, boxes: Sequence[Sequence[float]], labels: Sequence[str],
                      later: Sequence[bool]) -> list[np.ndarray | PendingCut]:
        """``segment``'s masks, except that a box ``later`` marks that GrabCut would cut gets the ``PendingCut``
        that ``complete`` turns into its mask, for a caller that may never need it (people the person model
        masks are masked now)."""
        if not len(boxes) == len(labels) == len(later):
            raise ValueError(f"{len(boxes)} boxes, {len(labels)} labels and {len(later)} flags")
        masks: list[np.ndarray | PendingCut | None] = [None] * len(boxes)
        people = [i for i, label in enumerate(labels)
                  if label in PERSON_LABELS and _longer_side(boxes[i]) >= MIN_PERSON_SIDE] if self.person is not None else []
        if people and self.person is not None:
            found = self.person.segment(image, [boxes[i] for i in people], [labels[i] for i in people])
            height, width = image.shape[:2]
            for i, mask in zip(people, found):
                if mask.sum() >= MIN_FILL * max(1, int(box_mask(boxes[i], width, height).sum())):
                    masks[i] = mask
        rest = [i for i, mask in enumerate(masks) if mask is None]
        if rest and isinstance(self.things, GrabCutSegmenter) and any(later[i] for i in rest):
            frame = np.ascontiguousarray(image[..., :3], dtype=np.uint8)
            for i in rest:
                if later[i]:
                    masks[i] = self.things.prepare(frame, boxes[i])
            rest = [i for i in rest if masks[i] is None]
        if rest:
            for i, mask in zip(rest, self.things.segment(image, [boxes[i] for i in rest], [labels[i] for i in rest])):
                masks[i] = mask
        return [mask for mask in masks if mask is not None]

    def complete(self, cut: PendingCut) -> np.ndarray:
        """The mask of a box ``segment_later`` left for later."""
        if not isinstance(self.things, GrabCutSegmenter):
            raise TypeError("only GrabCut's cuts are left for later")
        return self.things.complete(cut)

    def close(self) -> None:
        """Stop the person model's worker, where it has one."""
        close = getattr(self.person, "close", None)
        if callable(close):
            close()


def build_segmenter(spec: str | None, models_dir: Path) -> Segmenter | None:
    """The segmenter ``spec`` names: None (the default) the offline one, with the person model where it is
    installed; ``"grabcut"`` GrabCut for everything; ``"none"`` no masks (None); ``hf[:MODEL][?...]`` a
    Segment Anything model (``vidagent.perception.hf.segmenter``). Nothing is loaded here."""
    text = (spec or "").strip()
    if text.lower() == NO_MASKS:
        return None
    if text.lower() == GRABCUT:
        return OfflineSegmenter(GrabCutSegmenter())
    if text:
        from vidagent.perception.hf import build_backend

        segmenter: Segmenter = build_backend("segmenter", text)
        return segmenter
    from vidagent.perception.node_assets import selfie_assets_installed

    if not selfie_assets_installed(models_dir):
        log.info("the person segmentation model is not installed in %s (`vidagent models install centernet` "
                 "installs it): people's masks are GrabCut's", models_dir)
        return OfflineSegmenter(GrabCutSegmenter())
    from vidagent.perception.selfie import SelfieSegmenter

    return OfflineSegmenter(GrabCutSegmenter(), SelfieSegmenter(models_dir))
