"""Stage ``motion``: how the picture moves in each segment, from the frames alone (no model).

Per segment it samples ``samples_per_segment`` frames evenly, each with a companion a moment
later (``companion_s``: 0.1 s, or 1.5 frame intervals for slow videos, at most 0.2 s), so the
intervals compared alternate short (camera shake, fast swings) and long (slow pans, scene cuts).
``process`` keeps a small greyscale thumbnail of each frame; ``finish`` compares consecutive
thumbnails (``vidagent.video.motion``) and writes one ``motion`` row per segment. Intervals
belong to the segment their middle falls in.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from vidagent.memory.stages.base import Rows
from vidagent.memory.stages.thumbnails import ThumbnailFrames
from vidagent.memory.store import Library
from vidagent.video.motion import THUMBNAIL_SIDE, analyse, decode_thumbnail, describe
from vidagent.video.video import Video

# Raise when the analysis changes its words, so stored motion (and the segments that quote it) is rebuilt.
MOTION_VERSION = 1
SAMPLES_PER_SEGMENT = 4


class MotionStage(ThumbnailFrames):
    name = "motion"
    requires: tuple[str, ...] = ()

    def __init__(self, segment_seconds: float, samples_per_segment: int = SAMPLES_PER_SEGMENT) -> None:
        self.segment_seconds = segment_seconds
        self.samples_per_segment = samples_per_segment

    def config(self) -> dict[str, Any]:
        return {
            "segment_seconds": self.segment_seconds,
            "samples_per_segment": self.samples_per_segment,
            "thumbnail": THUMBNAIL_SIDE,
            "version": MOTION_VERSION,
        }

    def frame_times(self, video: Video) -> list[float]:
        companion = companion_s(video.info.fps)
        times: set[float] = set()
        for segment in video.segments(self.segment_seconds):
            step = (segment.end_s - segment.start_s) / self.samples_per_segment
            for j in range(self.samples_per_segment):
                anchor = segment.start_s + (j + 0.5) * step
                times.add(round(anchor, 3))
                times.add(round(anchor + min(companion, step / 2), 3))
        return sorted(times)

    def finish(self, video: Video, library: Library, results: Mapping[float, Any]) -> Rows:
        thumbnails = [(time_s, decode_thumbnail(results[time_s])) for time_s in self.frame_times(video)]
        intervals = analyse(thumbnails)
        segments = video.segments(self.segment_seconds)
        rows: list[tuple[Any, ...]] = []
        for segment in segments:
            last = segment.segment_id == len(segments) - 1
            mine = [i for i in intervals
                    if segment.start_s <= i.centre_s and (i.centre_s < segment.end_s or last)]
            summary = describe(mine)
            rows.append((segment.segment_id, segment.start_s, segment.end_s, summary.camera,
                         json.dumps(list(summary.cut_times)), summary.moving, summary.phrase))
        return {"motion": rows}


def companion_s(fps: float) -> float:
    """Seconds from a sampled frame to its companion: 0.1 s, or 1.5 frames where frames are
    further apart (so it is another frame), at most 0.2 s."""
    return round(min(0.2, max(0.1, 1.5 / fps if fps > 0 else 0.1)), 3)
