"""Stage ``camera``: the camera's own motion between consecutive object sample times, so the actions stage
measures speeds against the picture (a pan is not a walk).

A frame stage at the ``objects`` stage's sample times, so it shares that stage's decoding pass: ``process``
keeps a small greyscale thumbnail of each frame, ``finish`` fits the shift and zoom between consecutive ones
(``vidagent.video.motion.compare``: corners followed and a similarity transform fitted with RANSAC, things moving
in the scene are outliers) and writes one ``camera_path`` row per interval. ``vidagent.memory.camera_motion``
reads them back as a ``CameraPath``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from vidagent.memory.stages.base import Rows
from vidagent.memory.stages.thumbnails import ThumbnailFrames
from vidagent.memory.store import Library
from vidagent.video.motion import THUMBNAIL_SIDE, compare, decode_thumbnail
from vidagent.video.video import Video

# Raise when what is measured between the frames changes, so stored camera paths (and actions) are rebuilt.
CAMERA_VERSION = 1


class CameraStage(ThumbnailFrames):
    name = "camera"
    requires: tuple[str, ...] = ()

    def __init__(self, sample_times: Callable[[Video], list[float]], sampling: Mapping[str, Any]) -> None:
        """``sample_times``: the objects stage's sample times of a video; ``sampling``: what they depend on."""
        self.sample_times = sample_times
        self.sampling = dict(sampling)

    def config(self) -> dict[str, Any]:
        return {"sampling": self.sampling, "thumbnail": THUMBNAIL_SIDE, "version": CAMERA_VERSION}

    def frame_times(self, video: Video) -> list[float]:
        return self.sample_times(video)

    def finish(self, video: Video, library: Library, results: Mapping[float, Any]) -> Rows:
        thumbnails = [(time_s, decode_thumbnail(results[time_s])) for time_s in self.frame_times(video)]
        rows: list[tuple[Any, ...]] = []
        for (start_s, first), (end_s, second) in zip(thumbnails, thumbnails[1:]):
            if first.shape != second.shape:  # never within one video: an interval not followed, boxes not carried
                rows.append((start_s, end_s, 0.0, 0.0, 0.0, 0))
                continue
            motion = compare(first, second, end_s - start_s)
            rows.append((start_s, end_s, motion.shift_x, motion.shift_y, motion.zoom,
                         int(motion.tracked and not motion.abrupt)))
        return {"camera_path": rows}
