"""Where a tracked object is in any frame: its sampled boxes (and masks), filled in between.

The object memory detects objects in frames sampled a few times a second (``step_s`` apart); drawing
an object or removing it needs where it is in every frame. Between two samples at most ``max_gap_s``
apart the box moves linearly from one to the other; before the first sample, after the last, and on
each side of a longer gap (where the object was not seen) the box goes on for one step, moving as it
moved from its neighbouring sample (held still when it has none): the object may have been there until
the next sample missed it, and an object left half-removed is worse than a box kept a moment too long. Several detections of the object at one sampled time (two of its tracks
overlapping) count as one box around them all.

A mask, where a segmentation backend made one, is a COCO run-length encoding over the displayed
frame (the compressed string ``pycocotools`` writes, or a JSON list of counts): column-major runs
of background and foreground. It is used as it is at its own sample and moved with the box between
samples; a mask whose size does not match the frame is ignored, and the box stands in for it.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import Any, Sequence

import cv2
import numpy as np

Box = tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels of the displayed frame

_log = logging.getLogger(__name__)
GAP_STEPS = 2.5  # samples further apart than this many steps are not joined (the object was missed, or left)


@dataclass(frozen=True)
class TrackBox:
    """One sampled detection: when, where, and its mask (COCO RLE text) when one was made."""

    time_s: float
    box: Box
    mask: str | None = None


@dataclass(frozen=True)
class Placement:
    """Where the object is in one frame: its box, and the sampled mask moved to it (``None``: no mask)."""

    box: Box
    mask: np.ndarray | None = None  # bool (height, width)


class Track:
    """An object's sampled boxes over time (see the module's description)."""

    def __init__(self, boxes: Sequence[TrackBox], step_s: float, *, max_gap_s: float | None = None) -> None:
        if step_s <= 0:
            raise ValueError("the sampling step must be positive")
        merged: dict[float, list[TrackBox]] = {}
        for item in boxes:
            merged.setdefault(round(float(item.time_s), 3), []).append(item)
        self.samples: tuple[TrackBox, ...] = tuple(_merge(time_s, items) for time_s, items in sorted(merged.items()))
        self.step_s = float(step_s)
        self.max_gap_s = GAP_STEPS * self.step_s if max_gap_s is None else float(max_gap_s)
        self._times = np.array([s.time_s for s in self.samples], dtype=np.float64)

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def first_s(self) -> float:
        """When the object is first placed (a step before its first sample)."""
        return max(0.0, self.samples[0].time_s - self.step_s) if self.samples else 0.0

    @property
    def last_s(self) -> float:
        """When it is last placed (a step after its last sample)."""
        return self.samples[-1].time_s + self.step_s if self.samples else 0.0

    def box_at(self, time_s: float) -> Box | None:
        """The object's box in the frame shown at ``time_s``, or None when it is not there."""
        placed = self._at(time_s)
        return placed[0] if placed else None

    def place(self, time_s: float, width: int, height: int) -> Placement | None:
        """The object's box at ``time_s`` and, when its nearest sample has a mask that fits a
        ``width`` x ``height`` frame, that mask moved as the box moved; None when it is not there."""
        placed = self._at(time_s)
        if placed is None:
            return None
        box, nearest = placed
        mask = decode_mask_or_none(nearest.mask, width, height) if nearest.mask else None
        if mask is not None:
            dx = (box[0] + box[2] - nearest.box[0] - nearest.box[2]) / 2
            dy = (box[1] + box[3] - nearest.box[1] - nearest.box[3]) / 2
            if abs(dx) >= 0.5 or abs(dy) >= 0.5:
                shift = np.float32([[1, 0, dx], [0, 1, dy]])
                mask = cv2.warpAffine(mask.astype(np.uint8), shift, (width, height),
                                      flags=cv2.INTER_NEAREST).astype(bool)
        return Placement(box, mask)

    def _at(self, time_s: float) -> tuple[Box, TrackBox] | None:
        """The box at ``time_s`` and the sample nearest in time."""
        if not self.samples:
            return None
        t = float(time_s)
        after = int(np.searchsorted(self._times, t, side="left"))
        before = after - 1
        if after < len(self.samples) and abs(self._times[after] - t) < 1e-6:
            return self.samples[after].box, self.samples[after]
        hold = self.step_s + 1e-6
        left = self.samples[before] if before >= 0 else None
        right = self.samples[after] if after < len(self.samples) else None
        if left is not None and right is not None and right.time_s - left.time_s <= self.max_gap_s + 1e-6:
            weight = (t - left.time_s) / (right.time_s - left.time_s)
            box = tuple(a + (b - a) * weight for a, b in zip(left.box, right.box))
            return box, (left if weight <= 0.5 else right)  # type: ignore[return-value]
        if left is not None and t - left.time_s <= hold:
            return self._beyond(before, -1, t), left
        if right is not None and right.time_s - t <= hold:
            return self._beyond(after, 1, t), right
        return None

    def _beyond(self, index: int, inward: int, time_s: float) -> Box:
        """The box of sample ``index`` carried on to ``time_s``, outside the samples' joined stretch, at the
        speed it moved from its neighbour ``index + inward`` (when that one is near enough to be joined)."""
        sample = self.samples[index]
        other = index + inward
        if not 0 <= other < len(self.samples) or abs(self.samples[other].time_s - sample.time_s) > self.max_gap_s + 1e-6:
            return sample.box
        neighbour = self.samples[other]
        rate = (time_s - sample.time_s) / (sample.time_s - neighbour.time_s)
        x1, y1, x2, y2 = (a + (a - b) * rate for a, b in zip(sample.box, neighbour.box))
        return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)  # a box shrinking fast never turns inside out


def grown(box: Box, width: int, height: int, *, fraction: float, pixels: int) -> tuple[int, int, int, int]:
    """``box`` widened by ``fraction`` of its size plus ``pixels`` on every side, as whole pixels
    clipped to a ``width`` x ``height`` frame: (left, top, right, bottom), right and bottom exclusive."""
    x1, y1, x2, y2 = box
    pad_x, pad_y = (x2 - x1) * fraction + pixels, (y2 - y1) * fraction + pixels
    left = int(np.clip(math.floor(x1 - pad_x), 0, width))
    top = int(np.clip(math.floor(y1 - pad_y), 0, height))
    right = int(np.clip(math.ceil(x2 + pad_x), left, width))
    bottom = int(np.clip(math.ceil(y2 + pad_y), top, height))
    return left, top, right, bottom


def region(placement: Placement, width: int, height: int, *, fraction: float, pixels: int) -> np.ndarray:
    """The pixels the object covers in a ``width`` x ``height`` frame, grown a little: its mask
    dilated by ``pixels`` where it has one, else its box grown by ``fraction`` and ``pixels``."""
    if placement.mask is not None:
        size = 2 * max(1, pixels) + 1
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size))
        return cv2.dilate(placement.mask.astype(np.uint8), kernel).astype(bool)
    left, top, right, bottom = grown(placement.box, width, height, fraction=fraction, pixels=pixels)
    out = np.zeros((height, width), dtype=bool)
    out[top:bottom, left:right] = True
    return out


def decode_mask(rle: str | bytes | Sequence[int], width: int, height: int) -> np.ndarray:
    """A COCO run-length mask (compressed string, list of counts, or the list as JSON text) as a bool
    ``(height, width)`` array. Raises ``ValueError`` when it is no mask of that size."""
    import supervision as sv

    counts: Any = rle.decode("ascii") if isinstance(rle, bytes) else rle
    if isinstance(counts, str):
        counts = counts.strip()
        if counts.startswith("["):  # a JSON list of counts, or a compressed string starting with "[" (one of its codes)
            try:
                listed = [int(v) for v in json.loads(counts)]
            except (ValueError, TypeError):
                listed = []
            if listed and sum(listed) == int(width) * int(height):
                counts = listed
    elif not isinstance(counts, list):
        counts = [int(v) for v in counts]
    try:
        return np.asarray(sv.rle_to_mask(counts, (int(width), int(height))), dtype=bool)
    except (IndexError, KeyError) as exc:
        raise ValueError(f"a mask that is no {width}x{height} run-length mask") from exc


def decode_mask_or_none(rle: str, width: int, height: int) -> np.ndarray | None:
    """``decode_mask``, lenient: None (and a warning) where it would raise, so a mask that does not fit
    the frame is ignored and the box stands in for it."""
    try:
        return decode_mask(rle, width, height)
    except ValueError:
        _log.warning("a mask that does not fit a %dx%d frame was ignored", width, height)
        return None


def _merge(time_s: float, items: list[TrackBox]) -> TrackBox:
    if len(items) == 1:
        return TrackBox(time_s, tuple(float(v) for v in items[0].box), items[0].mask)  # type: ignore[arg-type]
    boxes = np.array([item.box for item in items], dtype=np.float64)
    box = (float(boxes[:, 0].min()), float(boxes[:, 1].min()), float(boxes[:, 2].max()), float(boxes[:, 3].max()))
    return TrackBox(time_s, box)  # the box around them all stands for their masks
