"""A ball the detector also calls a frisbee: a track whose boxes the detector labels now "sports ball", now
"frisbee" is a ball.

Measured with the COCO detector at 2 frames a second over the 25 shared clips that are not reserved: no clip holds
a frisbee, yet "frisbee" came up 16 times, 15 of them on the soccer ball a man juggles in
``github_sam2/05_default_juggle.mp4`` (4 of those at 0.5 or more), where the same ball was "sports ball" 17 times;
the one other was a single low-scored box in ``applausing.mp4``. A round ball seen spinning or blurred looks like a
disc, so a track's majority can fall on "frisbee" ("her ball is a frisbee"). Where at least ``MIN_BALL_SHARE`` of a
frisbee track's boxes were called a ball, the track is a ball; a frisbee the detector never calls a ball stays one.
"""

from __future__ import annotations

from typing import Mapping, Sequence

BALL, FRISBEE = "sports ball", "frisbee"

MIN_BALL_SHARE = 0.25
"""Share of a "frisbee" track's boxes called "sports ball" that makes the track a ball."""


def frisbee_tracks_that_are_balls(categories: Sequence[str], tracks: Mapping[int, Sequence[int]],
                                  track_category: Mapping[int, str]) -> set[int]:
    """The tracks whose majority class is "frisbee" but of whose rows (into ``categories``) at least
    ``MIN_BALL_SHARE`` are "sports ball"."""
    found = set()
    for track, rows in tracks.items():
        if track_category.get(track) != FRISBEE or len(rows) == 0:
            continue
        if sum(categories[row] == BALL for row in rows) >= MIN_BALL_SHARE * len(rows):
            found.add(track)
    return found
