"""Where the camera alone carries a box between two sampled frames, so the actions of the objects are
measured against the picture's own motion (a pan is not a walk).

``follow_camera(video, times)`` decodes small greyscale thumbnails at the objects' sample times (one
pass) and fits the camera's shift and zoom between consecutive ones (``vidagent.video.motion.compare``:
corners followed and a similarity transform fitted with RANSAC, so things moving in the scene are
outliers). The returned ``CameraPath`` moves a box by the shifts and zooms of the intervals from one
time to the other; where one of them could not be followed (too plain, a cut, a swing too fast) the
box stays where it was, as for a still camera.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Sequence

from vidagent.memory.actions import Box
from vidagent.video.motion import THUMBNAIL_SIDE, PairMotion, compare, motion_thumbnail
from vidagent.video.video import Video


@dataclass(frozen=True)
class CameraPath:
    """The camera's motion between consecutive sample times, over a ``width`` x ``height`` picture."""

    times: tuple[float, ...]
    motions: tuple[PairMotion, ...]  # between times[i] and times[i + 1]
    width: int
    height: int

    def __call__(self, t0: float, t1: float, box: Box) -> Box:
        """Where the camera alone carries ``box`` (seen at ``t0``) by ``t1`` (``trajectory_actions.Camera``)."""
        first = bisect.bisect_left(self.times, t0 - 1e-6)
        last = bisect.bisect_left(self.times, t1 - 1e-6)
        if first >= len(self.times) or last >= len(self.times) or abs(self.times[first] - t0) > 1e-3 \
                or abs(self.times[last] - t1) > 1e-3 or last <= first:
            return box
        moved = box
        for motion in self.motions[first:last]:
            if not motion.tracked or motion.abrupt:
                return box
            moved = _carry(moved, motion, self.width, self.height)
        return moved


def _carry(box: Box, motion: PairMotion, width: int, height: int) -> Box:
    """``box`` after the camera's shift and zoom over one interval (shifts are in frame widths a second)."""
    scale = math.exp(motion.zoom * motion.dt)
    shift_x, shift_y = motion.shift_x * width * motion.dt, motion.shift_y * width * motion.dt
    cx, cy = width / 2, height / 2
    x1, y1, x2, y2 = box
    return (cx + (x1 - cx) * scale + shift_x, cy + (y1 - cy) * scale + shift_y,
            cx + (x2 - cx) * scale + shift_x, cy + (y2 - cy) * scale + shift_y)


def follow_camera(video: Video, times: Sequence[float]) -> CameraPath:
    """The camera's path over the sampled ``times`` of ``video`` (module doc)."""
    wanted = sorted({round(float(t), 3) for t in times})
    thumbnails = [(frame.time_s, motion_thumbnail(frame.image))
                  for frame in video.frames_at(wanted, max_side=2 * THUMBNAIL_SIDE)]
    motions = tuple(compare(a, b, b_t - a_t) for (a_t, a), (b_t, b) in zip(thumbnails, thumbnails[1:]))
    return CameraPath(tuple(t for t, _ in thumbnails), motions, video.info.width, video.info.height)
