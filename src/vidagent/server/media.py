"""Evidence made visible: a frame as a JPEG thumbnail, a stretch of a video as a short mp4, cut on demand.

Thumbnails are kept in a small in-memory cache; clips are cut once into the server's clip folder (the
same cutter as evaluation clips: re-encoded, frame-accurate, written under a temporary name first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path


from vidagent.eval.clips import cut_clip
from vidagent.server.errors import RequestError
from vidagent.video.thumbnail import frame_jpeg
from vidagent.video.video import Video

THUMBNAIL_SIDES = (64, 1280)  # smallest and largest longer side a client may ask for
_CACHED_THUMBNAILS = 512


class MediaCutter:
    def __init__(self, clips_dir: Path, max_clip_seconds: float) -> None:
        self.clips_dir = clips_dir
        self.max_clip_seconds = max_clip_seconds
        self._thumbnails: OrderedDict[tuple[str, float, int], bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._clip_lock = threading.Lock()

    def thumbnail(self, video: Video, time_s: float, max_side: int = 320) -> bytes:
        """The frame at ``time_s`` as a JPEG whose longer side is at most ``max_side`` pixels."""
        if not THUMBNAIL_SIDES[0] <= max_side <= THUMBNAIL_SIDES[1]:
            raise RequestError(f"width must be between {THUMBNAIL_SIDES[0]} and {THUMBNAIL_SIDES[1]} pixels")
        _check_window(video, time_s, time_s)
        key = (video.content_hash, round(time_s, 2), max_side)
        with self._lock:
            if key in self._thumbnails:
                self._thumbnails.move_to_end(key)
                return self._thumbnails[key]
        data = frame_jpeg(video, time_s, max_side)
        if data is None:
            raise RequestError(f"no frame at {time_s:.2f} s", status=422)
        with self._lock:
            self._thumbnails[key] = data
            while len(self._thumbnails) > _CACHED_THUMBNAILS:
                self._thumbnails.popitem(last=False)
        return data

    def clip(self, video: Video, start_s: float, end_s: float) -> Path:
        """The ``start_s``-``end_s`` stretch of ``video`` as an mp4 file (cut now or reused)."""
        _check_window(video, start_s, end_s)
        if end_s <= start_s:
            raise RequestError(f"the clip must end after it starts ({start_s:g}-{end_s:g} s)")
        if end_s - start_s > self.max_clip_seconds:
            raise RequestError(f"clips are at most {self.max_clip_seconds:g} s long")
        with self._clip_lock:  # one cutter at a time: two requests for one window never share a temporary file
            return cut_clip(video.path, start_s, end_s, self.clips_dir)


def _check_window(video: Video, start_s: float, end_s: float) -> None:
    if not (0 <= start_s <= video.duration_s + 0.5 and 0 <= end_s <= video.duration_s + 0.5):
        raise RequestError(f"times must lie within the video (0-{video.duration_s:.2f} s)")
