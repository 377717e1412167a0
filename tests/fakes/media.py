"""A video source for planner tests that need no library: ``counted_video`` is a ``VideoMedia`` over a
memory that knows only the video's length and how many segments it has. Its segments themselves are
empty, so the answer's guards find no text in it, as in a toolbox with no memory."""

from __future__ import annotations

from dataclasses import dataclass, field

from vidagent.tools.media import VideoMedia
from vidagent.video.source import Source


@dataclass(frozen=True)
class _Length:
    duration_s: float
    path: str = ""


@dataclass
class CountedMemory:
    """What a planner reads of a memory up front (length, segment count and length), and nothing more."""

    video_id: str
    video: _Length
    segment_count: int
    segment_seconds: float
    segments: list = field(default_factory=list)
    has_pixels: bool = True


def counted_video(video_id: str, duration_s: float, segment_count: int, segment_seconds: float) -> VideoMedia:
    """The whole video ``video_id`` as a source whose memory says only these numbers."""
    memory = CountedMemory(video_id, _Length(duration_s), segment_count, segment_seconds)
    return VideoMedia(Source(video_id, "video"), memory)  # type: ignore[arg-type]
