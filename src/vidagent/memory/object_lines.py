"""One line per object from everything the memory knows of it (issue 25, item 3), e.g.

``"white and brown dog (Border collie?), large; tall, irregular outline; in view from the start, leaves
at 7.5 s; moves from the left to the centre; walks 0.0-3.5 s, stops at 3.5 s"``

Its parts: the appearance (category, ImageNet kind, colour, size: ``object_summary.describe_appearance``),
the mask's shape where masks were made (``mask_shape``), the motion (``object_summary.describe_motion``)
and the actions (``actions.actions_text``). ``best_sighting`` picks the sighting a crop of the object is
best cut from (for a captioner). Pure: the ``descriptions`` stage reads the rows and writes the lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vidagent.memory.actions import Action, actions_text
from vidagent.perception.masks import decode_mask

# Box height over width beyond which a mask is "tall" (a standing person: 2-3) or below which "wide" (a car side-on)
TALL, WIDE = 1.6, 0.625
# Share of its box a mask fills: a disc or ellipse fills pi/4 (0.79), a box 1; a person with arms and legs apart
# much less. "compact" at 0.7 or more, "irregular" under 0.45, else "rounded".
COMPACT, IRREGULAR = 0.7, 0.45
MAX_MASKS = 8  # masks decoded per object, spread over its sightings
# Actions named in a line at most: the line is shown to the SQL writer for each candidate object and embedded
# (E5 reads 512 tokens), so it stays a line.
MAX_LINE_ACTIONS = 8
EDGE_PIXELS = 2.0  # a box this close to the frame's edge is cut by it


@dataclass(frozen=True)
class MaskedSighting:
    """One sighting with its box (pixels), detector score and stored run-length mask (None: none made)."""

    time_s: float
    box: tuple[float, float, float, float]
    score: float
    mask: str | None


def mask_shape(sightings: Sequence[MaskedSighting], width: int, height: int) -> str:
    """The outline of an object's masks in words (``"tall, irregular outline"``); "" without masks."""
    masked = [s for s in sightings if s.mask]
    if not masked:
        return ""
    picks = np.linspace(0, len(masked) - 1, min(MAX_MASKS, len(masked))).round().astype(int)
    ratios, fills = [], []
    for i in sorted(set(picks.tolist())):
        mask = decode_mask(masked[i].mask, width, height)  # type: ignore[arg-type]
        rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        if not len(rows):
            continue
        box_h, box_w = rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1
        ratios.append(box_h / box_w)
        fills.append(float(mask.sum()) / (box_h * box_w))
    if not ratios:
        return ""
    ratio, fill = float(np.median(ratios)), float(np.median(fills))
    form = "tall" if ratio >= TALL else "wide" if ratio <= WIDE else "squat"
    outline = "compact" if fill >= COMPACT else "irregular" if fill < IRREGULAR else "rounded"
    return f"{form}, {outline} outline"


def object_line(appearance: str, motion: str, shape: str, actions: Sequence[Action]) -> str:
    """The object's line: its appearance, mask shape, motion and actions, the empty parts left out. Of
    many actions (a person in an hour of video) the ``MAX_LINE_ACTIONS`` surest are named, in time order,
    and how many more there are (the actions table holds them all)."""
    shown = list(actions)
    if len(shown) > MAX_LINE_ACTIONS:
        surest = sorted(range(len(shown)), key=lambda i: (-shown[i].confidence, i))[:MAX_LINE_ACTIONS]
        shown = [shown[i] for i in sorted(surest)]
    said = actions_text(shown) + (f" (and {len(actions) - len(shown)} more)" if len(shown) < len(actions) else "")
    return "; ".join(part for part in (appearance, shape, motion, said) if part)


def best_sighting(sightings: Sequence[MaskedSighting], width: int, height: int) -> MaskedSighting:
    """The sighting to cut the object's crop from: the largest confident box not cut by the frame's edge
    (any box when all are cut), by score times square-root area."""
    def cut(s: MaskedSighting) -> bool:
        x1, y1, x2, y2 = s.box
        return x1 <= EDGE_PIXELS or y1 <= EDGE_PIXELS or x2 >= width - EDGE_PIXELS or y2 >= height - EDGE_PIXELS

    whole = [s for s in sightings if not cut(s)] or list(sightings)
    return max(whole, key=lambda s: (s.score * np.sqrt(max(s.box[2] - s.box[0], 0) * max(s.box[3] - s.box[1], 0)),
                                     -s.time_s))
