"""One frame of a video as a JPEG thumbnail (the server's thumbnails and ``vidagent search --thumbnails``)."""

from __future__ import annotations

import io

from PIL import Image as PILImage

from vidagent.video.video import Video


def frame_jpeg(video: Video, time_s: float, max_side: int = 320, quality: int = 85) -> bytes | None:
    """The frame at ``time_s`` (clamped to the video) as JPEG bytes whose longer side is at most ``max_side``
    pixels; None when the video has no frame there."""
    at = min(max(0.0, time_s), max(0.0, video.duration_s - 0.05))
    frame = next(iter(video.frames_at([at], max_side=max_side)), None)
    if frame is None:
        return None
    buffer = io.BytesIO()
    PILImage.fromarray(frame.image).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()
