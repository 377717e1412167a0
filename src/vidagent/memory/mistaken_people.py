"""A person the detector took for an animal: a track of "dog" boxes that coincide with a person's box.

The COCO detector labels a crouching or kneeling person "dog" (a man crouched in the snow beside his dog in
``github_InternVideo/example1.mp4``: "dog" at 0.46-0.66 in most frames, and "person" 0.43 / "dog" 0.40 on the very
same box at 2 s), and the memory then counted two dogs. Where the detector itself called one of a track's boxes a
person as well (a person detection of the same frame covering the same box, IoU at least ``SAME_BOX_IOU``), the
whole track is that person. A real dog beside, in the arms of or in front of a person has a box of its own (in the
clips, IoU with the person's box under 0.3), so it keeps its class.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

import numpy as np

ANIMALS = frozenset({"dog", "cat", "horse", "sheep", "cow", "bear", "teddy bear"})
"""Classes a crouching or curled-up person is taken for."""

SAME_BOX_IOU = 0.7
"""Overlap at which an animal's box and a person's box in one frame are taken to be the same thing."""


def tracks_of_people(boxes: np.ndarray, times: Sequence[float], categories: Sequence[str],
                     tracks: Mapping[int, Sequence[int]], track_category: Mapping[int, str]) -> set[int]:
    """The animal tracks (by ``track_category``) one of whose boxes (rows of ``boxes``, (N, 4) x1 y1 x2 y2) is a
    person's box of the same frame (a row of category ``"person"`` at the same time, IoU >= ``SAME_BOX_IOU``)."""
    people: dict[float, list[int]] = defaultdict(list)
    for row, category in enumerate(categories):
        if category == "person":
            people[float(times[row])].append(row)
    found = set()
    for track, rows in tracks.items():
        if track_category.get(track) not in ANIMALS:
            continue
        if any(box_iou(boxes[row], boxes[other]) >= SAME_BOX_IOU
               for row in rows for other in people.get(float(times[row]), ())):
            found.add(track)
    return found


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two boxes (x1, y1, x2, y2)."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0
