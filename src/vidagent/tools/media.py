"""The media behind a question's sources: the one source type from the workspace to the tools.

A ``VideoMedia`` is a video or a clip of one: the video's memory and the window (seconds) the
source covers. An ``ImageMedia`` is an image or a crop: its pixels, and the video time it was
taken at when it is a crop of a video frame. The workspace makes them from the opened handles
(``video_media``, ``image_media``: the adapters at the edge), the ``Toolbox`` carries them in the
user's order, and the planners and AssistGPT's modules read them. Cutting a clip or a crop makes
new media whose ``Source`` names its parent; each kind tells its ``facts`` (duration, audio,
speech, on-screen text, a short account of its content) for the planner's Inspector.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence, TypeVar, Union

import numpy as np

from vidagent.errors import ToolInputError
from vidagent.memory.store import SegmentRecord
from vidagent.memory.stored_video import StoredVideo
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.base import FrameDescriber
from vidagent.perception.frame_words import seen_words
from vidagent.tools.observed import one_line
from vidagent.video.image import Image
from vidagent.video.sampling import spread_evenly
from vidagent.video.source import Source
from vidagent.video.video import Video

T = TypeVar("T")
FACT_WORDS = 30  # words of content description in a source's facts
MIN_CROP_PIXELS = 4  # a crop narrower or lower than this is refused


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


@dataclass(frozen=True)
class VideoMedia:
    """A video or a clip of one, read through the video's memory.

    ``segment_fallback_s``: the segment length the planner is told while the memory has no segments
    (the settings' length it is built with). ``opened``: False when the planner needs no memory
    (``Needs(memory=False)``): it is told the video's length only, no segments, and the toolbox lists
    no memory for it."""

    source: Source
    memory: VideoMemory
    segment_fallback_s: float = 0.0
    opened: bool = True

    @property
    def window(self) -> tuple[float, float]:
        return self.source.window or (0.0, self.memory.video.duration_s)

    @property
    def duration_s(self) -> float:
        start, end = self.window
        return end - start

    @property
    def segment_count(self) -> int:
        """How many segments the video's memory has (their ids run over the whole video, a clip's too;
        0 when the memory was not opened)."""
        return self.memory.segment_count if self.opened else 0

    @property
    def segment_seconds(self) -> float:
        """How long a segment is: the memory's own length (2 s built; an imported memory's captions set
        theirs), else the fallback."""
        own = self.memory.segment_seconds if self.opened else 0.0
        return own or self.segment_fallback_s

    @property
    def has_pixels(self) -> bool:
        """Whether there are frames to look at (not in a memory imported from captions)."""
        return self.memory.has_pixels

    @property
    def serves_speech(self) -> bool:
        """Whether its speech can be read: a video with a file (its speech stage builds when asked for),
        or a memory that has a speech stage."""
        return self.memory.has_pixels or "speech" in self.memory.stages

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
        return replace(self, source=self.source.clip(start, end))

    def frame(self, time_s: float, max_side: int | None = None) -> np.ndarray:
        start, end = self.window
        return next(iter(self.memory.video.frames_at([min(max(time_s, start), end)], max_side=max_side))).image

    def facts(self, describer: FrameDescriber | None = None) -> MediaFacts:
        """What the memory says of the window: its length, audio, speech and on-screen text, and the
        descriptions of three segments spread over it (``describer`` is not needed: the memory was described)."""
        segments = self.segments()
        seen: list[str] = []
        for segment in spread_evenly(segments, 3):
            description = one_line(segment.description)
            if description and description not in seen:
                seen.append(description)
        return MediaFacts(self.source.kind, self.duration_s, None, self.memory.video.info.has_audio,
                          bool(self.speech()), any(s.on_screen_text for s in segments),
                          _words(" | ".join(seen), FACT_WORDS))


@dataclass(frozen=True)
class ImageMedia:
    """An image, or a crop of an image or of a video's frame: its pixels."""

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

    @property
    def has_pixels(self) -> bool:
        return True

    @property
    def serves_speech(self) -> bool:
        return False

    def facts(self, describer: FrameDescriber | None = None) -> MediaFacts:
        """Its size, and what ``describer`` sees in it and whether it shows text (nothing without a describer)."""
        height, width = self.pixels.shape[:2]
        content, has_text = "", False
        if describer is not None:
            description = describer.describe([self.pixels])[0]
            content, has_text = _words(one_line(seen_words(description)), FACT_WORDS), bool(description.on_screen_text)
        return MediaFacts(self.source.kind, None, (width, height), False, False, has_text, content)


Media = Union[VideoMedia, ImageMedia]


def image_media(image: Image) -> ImageMedia:
    return ImageMedia(Source(image.content_hash, "image", str(image.path)), image.pixels)


def video_media(memory: VideoMemory, segment_fallback_s: float = 0.0, *, opened: bool = True) -> VideoMedia:
    """A whole video as a source, read through ``memory`` (see ``VideoMedia`` for the rest)."""
    return VideoMedia(Source(memory.video_id, "video", str(memory.video.path)), memory, segment_fallback_s, opened)


def videos_among(media: Iterable[Media]) -> list[VideoMedia]:
    """The videos and clips among ``media``, in their order."""
    return [item for item in media if isinstance(item, VideoMedia)]


def video_file(video: Video | StoredVideo) -> Video | None:
    """The file behind a video's handle, for the work that needs it (building a memory, cutting, drawing):
    None for a memory imported from captions, which has no file and no pixels."""
    return video if isinstance(video, Video) else None


def frame_media(media: VideoMedia, time_s: float, max_side: int | None = None) -> ImageMedia:
    """One frame of a video as an image source (a crop covering the whole frame)."""
    pixels = media.frame(time_s, max_side)
    height, width = pixels.shape[:2]
    return ImageMedia(media.source.crop((0, 0, width, height), time_s), pixels)


def _words(text: str, limit: int) -> str:
    words = text.split()
    return " ".join(words[:limit]) + (" ..." if len(words) > limit else "")
