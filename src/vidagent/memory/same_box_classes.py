"""One thing, two classes: where the detector gives the same box two labels in one frame, the truer one names it,
and every box of its track.

The COCO detector keeps a box under each class it scores, so an unsure thing comes out twice. Two confusions did
harm on the shared clips (that are not reserved):

* a crouching person as a dog: the man crouched in the snow in ``github_InternVideo/example1.mp4`` is "dog" at
  0.46-0.66 in most frames, and "person" 0.43 / "dog" 0.40 on the very same box at 2 s; the memory counted two dogs;
* a ball as a frisbee: measured at 2 frames a second, "frisbee" came up 16 times and no clip holds a frisbee, 15 of
  them on the soccer ball juggled in ``github_sam2/05_default_juggle.mp4`` (4 at 0.5 or more; the same ball was
  "sports ball" 17 times), most on the very box also called "sports ball"; the ball became a second object, "white
  frisbee".

So a box of a confusable class (``TRUER``: an animal for a person, a frisbee for a ball) that a box of the truer
class of the same frame covers (IoU at least ``SAME_BOX_IOU``) takes the truer class, and so does every box of a
track holding such a box. A real dog beside or in the arms of a person, or a frisbee thrown past a ball, has a box
of its own (IoU with the other under 0.3 on the clips), so it keeps its class.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

import numpy as np

from vidagent.perception.detections import SAME_BOX_IOU, TAKEN_FOR

TRUER: Mapping[str, str] = {**{animal: "person" for animal in ("dog", "cat", "horse", "sheep", "cow", "bear",
                                                               "teddy bear")},
                            **TAKEN_FOR}
"""For each class the detector mistakes, the class it is taken for when both name one box."""


def same_box_classes(boxes: np.ndarray, times: Sequence[float], categories: Sequence[str]) -> dict[int, int]:
    """The rows (of ``boxes``, (N, 4) x1 y1 x2 y2, at ``times``) that a row of a truer class of the same frame
    covers, each with that row."""
    by_frame: dict[tuple[float, str], list[int]] = defaultdict(list)
    for row, category in enumerate(categories):
        by_frame[(float(times[row]), str(category))].append(row)
    found: dict[int, int] = {}
    for row, category in enumerate(categories):
        truer = TRUER.get(str(category))
        partner = next((other for other in by_frame.get((float(times[row]), truer or ""), ())
                        if box_iou(boxes[row], boxes[other]) >= SAME_BOX_IOU), None) if truer else None
        if partner is not None:
            found[row] = partner
    return found


def corrected(categories: Sequence[str], scores: Sequence[float], track_ids: np.ndarray, times: Sequence[float],
              partners: Mapping[int, int]) -> tuple[list[str], np.ndarray]:
    """``categories`` and ``track_ids`` (-1: no track) after the truer class takes over (``partners`` from
    ``same_box_classes``). A covered row without a track takes its partner's class. A track takes it, every row of
    it, where the detector was at least as sure of the truer class on its covered rows (summed scores), or where
    those rows are at least half the track; it then joins the partner's track (a row at a time that track already
    covers is a duplicate and leaves every track). A long track covered once by a less sure box keeps its class
    (the skateboarding dog, "person" 0.30 on its "dog" 0.35 box in one of 26 frames)."""
    categories, track_ids = list(categories), np.array(track_ids, copy=True)
    covered: dict[int, list[int]] = defaultdict(list)
    for row in partners:
        if track_ids[row] < 0:
            categories[row] = categories[partners[row]]
        else:
            covered[int(track_ids[row])].append(row)
    for own, rows in covered.items():
        members = np.flatnonzero(track_ids == own)
        truer_score = sum(float(scores[partners[row]]) for row in rows)
        if truer_score < sum(float(scores[row]) for row in rows) and 2 * len(rows) < len(members):
            continue
        partner = partners[rows[0]]
        for member in members:
            categories[member] = categories[partner]
        target = int(track_ids[partner])
        if target < 0:
            continue
        taken = {float(times[i]) for i in np.flatnonzero(track_ids == target)}
        for member in members:
            track_ids[member] = -1 if float(times[member]) in taken else target
    return categories, track_ids


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two boxes (x1, y1, x2, y2)."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0
