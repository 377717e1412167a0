"""What the frame stages that compare frames with each other share (``motion``, ``camera``): each frame's result is
a small greyscale thumbnail (``vidagent.video.motion``), compared with its neighbours once all are in. They compare
frames with each other, so they never reuse a near-duplicate frame's result."""

from __future__ import annotations

from typing import Any, Sequence

from vidagent.video.change import ChangeLimits
from vidagent.video.motion import THUMBNAIL_SIDE, encode_thumbnail, motion_thumbnail
from vidagent.video.video import SampledFrame


class ThumbnailFrames:
    """A frame stage's per-frame step that keeps each frame as an encoded motion thumbnail."""

    max_side = 2 * THUMBNAIL_SIDE  # decoding size when the stage runs alone; thumbnails are made in process
    batch_size = 16
    reuse: ChangeLimits | None = None

    def process(self, frames: Sequence[SampledFrame]) -> list[Any]:
        return [encode_thumbnail(motion_thumbnail(frame.image)) for frame in frames]
