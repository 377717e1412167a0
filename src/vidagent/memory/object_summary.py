"""Words for one object of the object memory: what it looks like and how it moves.

``describe_appearance`` -> e.g. ``"white and brown dog, large"``: the colour words of the object's
crops (``vidagent.perception.colour``) pooled over its detections, plus a size word from the
median box area (``small`` < 2% of the frame, ``medium`` < 15%, else ``large``).

``describe_motion`` -> e.g. ``"appears at 3.0 s, leaves at 7.5 s; moves from the middle right
to the centre; approaches the camera (grows)"``, from the trajectory of box centres and sizes
(each part is left out or replaced when it does not apply):

* **when**: first and last sighting ("appears at 3.0 s, leaves at 7.5 s"); "in view from the
  start" / "stays until the end" when they lie within ``edge_s`` (0.6 s) of the video's ends
  (``duration_s`` given). Gaps between sightings longer than ``gap_s`` (1 s) and than 2.5 times
  the usual interval between sightings (so one missed sample is not a gap) are listed as
  "(not seen 4.0-6.5 s)": the object left, was hidden, or the detector missed it.
* **where**: the start and end places are the median box centre over the first and last
  quarter of the sightings (robust to one bad box) on the describer's 3x3 grid ("top left" ...
  "centre"). A net move of less than ``still_share`` (15%) of the frame size is "stays at the X"
  (or "moves around the X" when the centre travelled more than ``wander_share`` (60%) of the
  frame in total); otherwise "moves from the A to the B", or "moves left within the A" when both
  ends fall in one cell.
* **depth**: the linear box size (square root of the area) at the end over the start, with the
  same robust ends: above ``grow_ratio`` (1.5) "approaches the camera (grows)", below its inverse
  "moves away from the camera (shrinks)".

Everything is deterministic and uses only the boxes, so it works with any detector.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from vidagent.perception.frame_words import position_words, size_word

Box = Sequence[float]

STILL_SHARE = 0.15
WANDER_SHARE = 0.6
GROW_RATIO = 1.5
GAP_S = 1.0
GAP_STEPS = 2.5  # ...and longer than this many sampling intervals (one missed sample is no gap)
EDGE_S = 0.6
SECOND_COLOUR_SHARE = 0.3  # a second colour named in this share of the votes is named too
_END_SHARE = 0.25  # the first/last quarter of the sightings give the start/end place and size
_NO_COLOUR = ("", "unknown")


def _fmt(t: float) -> str:
    return f"{t:.1f} s"


def dominant_colours(colours: Sequence[str]) -> str:
    """One colour phrase from per-crop colour words (``"white"``, ``"black and white"``, ...).

    Each crop's first colour gets one vote and its second half a vote; the winner is named, and
    the runner-up too when it got at least 30% of the votes (``"white and brown"``). Ties go to
    the colour seen first. Empty or unknown colours give ``""``.
    """
    votes: dict[str, float] = {}
    first_seen: dict[str, int] = {}
    for word in colours:
        if word in _NO_COLOUR:
            continue
        for rank, part in enumerate(word.split(" and ")[:2]):
            votes[part] = votes.get(part, 0.0) + (1.0 if rank == 0 else 0.5)
            first_seen.setdefault(part, len(first_seen))
    if not votes:
        return ""
    total = sum(votes.values())
    ranked = sorted(votes, key=lambda c: (-votes[c], first_seen[c]))
    if len(ranked) > 1 and votes[ranked[1]] >= SECOND_COLOUR_SHARE * total:
        return f"{ranked[0]} and {ranked[1]}"
    return ranked[0]


def describe_appearance(category: str, colours: Sequence[str], boxes: Sequence[Box], width: int,
                        height: int, *, kind: str = "") -> str:
    """``"<colour> <category>, <size>"`` from per-crop colour words and the object's boxes; a
    ``kind`` (an ImageNet guess such as ``"Border collie?"``) follows the category in brackets."""
    colour = dominant_colours(colours)
    areas = [max(float(b[2]) - float(b[0]), 0.0) * max(float(b[3]) - float(b[1]), 0.0) for b in boxes]
    noun = f"{colour} {category}" if colour else category
    noun = f"{noun} ({kind})" if kind else noun
    if not areas:
        return noun
    side = float(np.sqrt(np.median(areas)))
    return f"{noun}, {size_word((0.0, 0.0, side, side), width, height)}"


def _visibility(times: np.ndarray, duration_s: float | None, gap_s: float, edge_s: float) -> str:
    first, last = float(times[0]), float(times[-1])
    if len(times) == 1:
        return f"seen only at {_fmt(first)}"
    from_start = first <= edge_s
    to_end = duration_s is not None and last >= duration_s - edge_s
    if from_start and to_end:
        text = "in view from start to end"
    elif from_start:
        text = f"in view from the start, leaves at {_fmt(last)}"
    elif to_end:
        text = f"appears at {_fmt(first)}, stays until the end"
    else:
        text = f"appears at {_fmt(first)}, leaves at {_fmt(last)}"
    steps = np.diff(times)
    limit = max(gap_s, GAP_STEPS * float(np.median(steps)))
    gaps = [(float(a), float(b)) for a, b, step in zip(times[:-1], times[1:], steps) if step > limit]
    if gaps:
        text += " (not seen " + ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in gaps) + ")"
    return text


def _direction(dx: float, dy: float) -> str:
    if abs(dx) >= abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"


def describe_motion(trajectory: Sequence[tuple[float, Box]], width: int, height: int, *,
                    duration_s: float | None = None, still_share: float = STILL_SHARE,
                    wander_share: float = WANDER_SHARE, grow_ratio: float = GROW_RATIO,
                    gap_s: float = GAP_S, edge_s: float = EDGE_S) -> str:
    """When the object is in view, where it goes and whether it nears the camera (module doc).

    ``trajectory`` holds ``(time_s, (x1, y1, x2, y2))`` per sighting, in pixels of a
    ``width`` x ``height`` frame, in any order.
    """
    if not trajectory:
        return "never seen"
    points = sorted(((float(t), tuple(float(v) for v in box[:4])) for t, box in trajectory),
                    key=lambda p: p[0])
    times = np.array([t for t, _ in points])
    boxes = np.array([b for _, b in points])
    w, h = float(max(width, 1)), float(max(height, 1))
    centres = np.stack([(boxes[:, 0] + boxes[:, 2]) / 2 / w, (boxes[:, 1] + boxes[:, 3]) / 2 / h], axis=1)
    sides = np.sqrt(np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None))
    parts = [_visibility(times, duration_s, gap_s, edge_s)]

    n = len(points)
    if n == 1:
        parts.append(f"at the {position_words(boxes[0], int(w), int(h))}")
        return "; ".join(parts)
    k = max(1, int(round(n * _END_SHARE)))
    start, end = np.median(centres[:k], axis=0), np.median(centres[-k:], axis=0)
    start_cell = position_words(_box_at(start, w, h), int(w), int(h))
    end_cell = position_words(_box_at(end, w, h), int(w), int(h))
    dx, dy = float(end[0] - start[0]), float(end[1] - start[1])
    if max(abs(dx), abs(dy)) < still_share:
        travelled = float(np.linalg.norm(np.diff(centres, axis=0), axis=1).sum())
        middle = position_words(_box_at(np.median(centres, axis=0), w, h), int(w), int(h))
        verb = "moves around" if travelled > wander_share else "stays at"
        parts.append(f"{verb} the {middle}")
    elif start_cell != end_cell:
        parts.append(f"moves from the {start_cell} to the {end_cell}")
    else:
        parts.append(f"moves {_direction(dx, dy)} within the {start_cell}")

    first_side, last_side = float(np.median(sides[:k])), float(np.median(sides[-k:]))
    if first_side > 0 and last_side / first_side >= grow_ratio:
        parts.append("approaches the camera (grows)")
    elif last_side > 0 and first_side / last_side >= grow_ratio:
        parts.append("moves away from the camera (shrinks)")
    return "; ".join(parts)


def _box_at(centre: np.ndarray, w: float, h: float) -> tuple[float, float, float, float]:
    """A point box at a normalised centre, in pixels (for ``position_words``)."""
    x, y = float(centre[0]) * w, float(centre[1]) * h
    return (x, y, x, y)
