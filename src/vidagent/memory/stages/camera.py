"""Stage ``camera``: the camera's own motion between consecutive object sample times, so the actions stage
measures speeds against the picture (a pan is not a walk).

A frame stage at the ``objects`` stage's sample times, so it shares that stage's decoding pass: ``process``
keeps a small greyscale thumbnail of each frame, ``finish`` fits the shift and zoom between consecutive ones
(``vidagent.video.motion.compare``: corners followed and a similarity transform fitted with RANSAC, things moving
in the scene are outliers) and writes one ``camera_path`` row per interval. ``vidagent.memory.camera_motion``
reads them back as a ``CameraPath``. Like ``motion``, it compares frames with each other, so it never reuses a
near-duplicate frame's result.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from vidagent.memory.stages.base import Rows
from vidagent.memory.store import Library
from vidagent.video.change import ChangeLimits
from vidagent.video.motion import THUMBNAIL_SIDE, compare, decode_thumbnail, encode_thumbnail, motion_thumbnail
from vidagent.video.video import SampledFrame, Video

# Raise when what is measured between the frames changes, so stored camera paths (and actions) are rebuilt.
CAMERA_VERSION = 1


class CameraStage:
    name = "camera"
    requires: tuple[str, ...] = ()
    max_side = 2 * THUMBNAIL_SIDE  # decoding size when it runs alone; thumbnails are made in process
    batch_size = 16
    reuse: ChangeLimits | None = None

    def __init__(self, sample_times: Callable[[Video], list[float]], sampling: Mapping[str, Any]) -> None:
        """``sample_times``: the objects stage's sample times of a video; ``sampling``: what they depend on."""
        self.sample_times = sample_times
        self.sampling = dict(sampling)

    def config(self) -> dict[str, Any]:
        return {"sampling": self.sampling, "thumbnail": THUMBNAIL_SIDE, "version": CAMERA_VERSION}

    def frame_times(self, video: Video) -> list[float]:
        return self.sample_times(video)

    def process(self, frames: Sequence[SampledFrame]) -> list[Any]:
        return [encode_thumbnail(motion_thumbnail(frame.image)) for frame in frames]

    def finish(self, video: Video, library: Library, results: Mapping[float, Any]) -> Rows:
        thumbnails = [(time_s, decode_thumbnail(results[time_s])) for time_s in self.frame_times(video)]
        rows: list[tuple[Any, ...]] = []
        for (start_s, first), (end_s, second) in zip(thumbnails, thumbnails[1:]):
            if first.shape != second.shape:
                continue  # never within one video
            motion = compare(first, second, end_s - start_s)
            rows.append((start_s, end_s, motion.shift_x, motion.shift_y, motion.zoom,
                         int(motion.tracked and not motion.abrupt)))
        return {"camera_path": rows}
