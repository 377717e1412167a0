"""The media behind a question's sources, as tools read them.

A ``VideoMedia`` is a video or a clip of one: the video's memory and the window (seconds) the
source covers. An ``ImageMedia`` is an image or a crop: its pixels, and the video time it was
taken at when it is a crop of a video frame. Cutting a clip or a crop makes new media whose
``Source`` names its parent; ``facts`` tells what a source holds (duration, audio, speech,
on-screen text, a short account of its content) for the planner's Inspector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, TypeVar, Union

import numpy as np

from vidagent.errors import ToolInputError
from vidagent.memory.store import SegmentRecord
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.base import FrameDescriber
from vidagent.perception.frame_words import seen_words
from vidagent.tools.observed import one_line
from vidagent.video.image import Image
from vidagent.video.sampling import spread_evenly
from vidagent.video.source import Source

T = TypeVar("T")
FACT_WORDS = 30  # words of content description in a source's facts
MIN_CROP_PIXELS = 4  # a crop narrower or lower than this is refused


@dataclass(frozen=True)
class VideoMedia:
    source: Source
    memory: VideoMemory

    @property
    def window(self) -> tuple[float, float]:
        return self.source.window or (0.0, self.memory.video.duration_s)

    @property
    def duration_s(self) -> float:
        start, end = self.window
        return end - start

    def segments(self) -> list[SegmentRecord]:
        """The memory's segments that overlap the window."""
        start, end = self.window
        return [s for s in self.memory.segments if s.end_s > start + 1e-6 and s.start_s < end - 1e-6]

    def speech(self) -> list[tuple[float, float, str]]:
        start, end = self.window
        return [line for line in self.memory.speech if line[1] > start and line[0] < end and line[2].strip()]

    def clip(self, start_s: float, end_s: float) -> "VideoMedia":
        """A clip of this media, clamped to its window; a ``ToolInputError`` when nothing is left."""
        low, high = self.window
        start, end = max(low, min(start_s, end_s)), min(high, max(start_s, end_s))
        if end - start < 0.05:
            raise ToolInputError(f"the clip {start_s:g}-{end_s:g} s lies outside {low:g}-{high:g} s")
        return VideoMedia(self.source.clip(start, end), self.memory)

    def frame(self, time_s: float, max_side: int | None = None) -> np.ndarray:
        start, end = self.window
        return next(iter(self.memory.video.frames_at([min(max(time_s, start), end)], max_side=max_side))).image


@dataclass(frozen=True)
class ImageMedia:
    source: Source
    pixels: np.ndarray

    def crop(self, box: Sequence[float]) -> "ImageMedia":
        """The box (x1, y1, x2, y2 pixels, clamped to the image) as a new crop."""
        height, width = self.pixels.shape[:2]
        x1, y1, x2, y2 = (float(v) for v in box)
        x1, x2 = sorted((max(0.0, min(width, x1)), max(0.0, min(width, x2))))
        y1, y2 = sorted((max(0.0, min(height, y1)), max(0.0, min(height, y2))))
        if x2 - x1 < MIN_CROP_PIXELS or y2 - y1 < MIN_CROP_PIXELS:
            raise ToolInputError(f"the crop [{x1:.0f}, {y1:.0f}, {x2:.0f}, {y2:.0f}] is empty")
        pixels = np.ascontiguousarray(self.pixels[round(y1):round(y2), round(x1):round(x2)])
        return ImageMedia(self.source.crop((x1, y1, x2, y2)), pixels)


Media = Union[VideoMedia, ImageMedia]


def image_media(image: Image) -> ImageMedia:
    return ImageMedia(Source(image.content_hash, "image", str(image.path)), image.pixels)


def video_media(memory: VideoMemory) -> VideoMedia:
    return VideoMedia(Source(memory.video_id, "video", str(memory.video.path)), memory)


def frame_media(media: VideoMedia, time_s: float, max_side: int | None = None) -> ImageMedia:
    """One frame of a video as an image source (a crop covering the whole frame)."""
    pixels = media.frame(time_s, max_side)
    height, width = pixels.shape[:2]
    return ImageMedia(media.source.crop((0, 0, width, height), time_s), pixels)


@dataclass(frozen=True)
class MediaFacts:
    """What the Inspector tells the planner about a source."""

    kind: str
    duration_s: float | None
    size: tuple[int, int] | None  # width, height of an image or crop
    has_audio: bool
    has_speech: bool
    has_text: bool
    content: str


def facts(media: Media, describer: FrameDescriber | None = None) -> MediaFacts:
    """A source's facts, read from its memory (videos, clips) or its pixels (images, crops)."""
    if isinstance(media, VideoMedia):
        segments = media.segments()
        picked = spread_evenly(segments, 3)
        seen: list[str] = []
        for segment in picked:
            description = one_line(segment.description)
            if description and description not in seen:
                seen.append(description)
        return MediaFacts(media.source.kind, media.duration_s, None, media.memory.video.info.has_audio,
                          bool(media.speech()), any(s.on_screen_text for s in segments),
                          _words(" | ".join(seen), FACT_WORDS))
    height, width = media.pixels.shape[:2]
    content, has_text = "", False
    if describer is not None:
        description = describer.describe([media.pixels])[0]
        content, has_text = _words(one_line(seen_words(description)), FACT_WORDS), bool(description.on_screen_text)
    return MediaFacts(media.source.kind, None, (width, height), False, False, has_text, content)


def _words(text: str, limit: int) -> str:
    words = text.split()
    return " ".join(words[:limit]) + (" ..." if len(words) > limit else "")
