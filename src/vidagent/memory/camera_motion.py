"""Where the camera alone carries a box between two sampled frames, so the actions of the objects are
measured against the picture's own motion (a pan is not a walk).

The ``camera`` stage (``vidagent.memory.stages.camera``) fits the camera's shift and zoom between consecutive
object sample times in the objects stage's own decoding pass and stores them (``camera_path``);
``stored_camera_path`` reads them back as a ``CameraPath``, which moves a box by the shifts and zooms of the
intervals from one time to the other. Where one of them could not be followed (too plain, a cut, a swing too fast)
the box stays where it was, as for a still camera.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from vidagent.memory.actions import Box
from vidagent.memory.store import Library


@dataclass(frozen=True)
class CameraStep:
    """The camera's motion over one interval: ``shift_x``/``shift_y`` how fast the picture's content moves (frame
    widths a second), ``zoom`` its log scale change a second; ``followed``: the motion could be measured."""

    dt: float
    shift_x: float
    shift_y: float
    zoom: float
    followed: bool


@dataclass(frozen=True)
class CameraPath:
    """The camera's motion between consecutive sample times, over a ``width`` x ``height`` picture."""

    times: tuple[float, ...]
    steps: tuple[CameraStep, ...]  # between times[i] and times[i + 1]
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
        for step in self.steps[first:last]:
            if not step.followed:
                return box
            moved = _carry(moved, step, self.width, self.height)
        return moved


def stored_camera_path(library: Library, video_id: str, width: int, height: int) -> CameraPath | None:
    """The camera path the ``camera`` stage stored for a video (None: fewer than two sample times): its intervals
    follow one another, one for each pair of consecutive sample times."""
    rows = library.rows("SELECT start_s, end_s, shift_x, shift_y, zoom, followed FROM camera_path "
                        "WHERE video_id=? ORDER BY start_s", (video_id,))
    if not rows:
        return None
    times = (float(rows[0][0]), *(float(end_s) for _, end_s, *_ in rows))
    steps = tuple(CameraStep(float(end_s) - float(start_s), float(shift_x), float(shift_y), float(zoom), bool(followed))
                  for start_s, end_s, shift_x, shift_y, zoom, followed in rows)
    return CameraPath(times, steps, width, height)


def _carry(box: Box, step: CameraStep, width: int, height: int) -> Box:
    """``box`` after the camera's shift and zoom over one interval (shifts are in frame widths a second)."""
    scale = math.exp(step.zoom * step.dt)
    shift_x, shift_y = step.shift_x * width * step.dt, step.shift_y * width * step.dt
    cx, cy = width / 2, height / 2
    x1, y1, x2, y2 = box
    return (cx + (x1 - cx) * scale + shift_x, cy + (y1 - cy) * scale + shift_y,
            cx + (x2 - cx) * scale + shift_x, cy + (y2 - cy) * scale + shift_y)
