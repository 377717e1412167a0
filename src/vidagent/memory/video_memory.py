"""Read access to one video's stored memory, as the tools see it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from vidagent.memory.coverage import Coverage, Window
from vidagent.memory.store import GLANCE_KEY, FrameRecord, Library, ObjectRecord, SegmentRecord
from vidagent.memory.stored_video import StoredVideo
from vidagent.video.video import Video

DETECTOR_LABEL_MARK = "[detector"
"""How the offline describer's labels begin (``perception.describer.DESCRIPTION_PREFIX``/``_OCR``); captions have ""."""


@dataclass(frozen=True)
class ScoredSegment:
    segment: SegmentRecord
    score: float


class VideoMemory:
    """The temporal memory of one video (segments, frames, speech) in a library. The video is a file
    (``Video``) or, for a memory imported from released captions, a ``StoredVideo`` without pixels."""

    def __init__(self, video: Video | StoredVideo, library: Library) -> None:
        self.video = video
        self.library = library
        self.video_id = video.content_hash

    @property
    def has_pixels(self) -> bool:
        """Whether frames can be looked at (False for a memory imported from captions)."""
        return getattr(self.video, "has_pixels", True)

    @property
    def note(self) -> str:
        """What an LLM reading this memory's descriptions is told they are, said once per memory: an
        imported memory's note, else the note of what described its frames ("" before it is built)."""
        provenance = getattr(self.video, "provenance", None)
        if provenance is not None:
            return provenance.note
        describer = self.library.describer(self.video_id)
        return describer.note if describer else ""

    @property
    def captioned(self) -> bool:
        """Whether a captioner (a vision model, or a released caption set) described this memory's frames, so it
        can say what scenes, materials and actions look like; False for the offline detector's descriptions (or
        before the frames are described)."""
        if getattr(self.video, "provenance", None) is not None:
            return True
        describer = self.library.describer(self.video_id)
        return describer is not None and not describer.label.startswith(DETECTOR_LABEL_MARK)

    @property
    def segment_seconds(self) -> float:
        """How long a segment is (2 s for a built memory; an imported one's captions set their own)."""
        segments = self.segments
        return segments[0].end_s - segments[0].start_s if segments else 0.0

    def segments_between(self, start_s: float, end_s: float) -> list[SegmentRecord]:
        """The segments that overlap ``[start_s, end_s]`` (the one holding the time when they are equal)."""
        if end_s <= start_s:
            holding = [s for s in self.segments if s.start_s <= start_s < s.end_s][:1]
            return holding or [s for s in self.segments[-1:] if s.start_s <= start_s <= s.end_s]
        return [s for s in self.segments if s.end_s > start_s + 1e-6 and s.start_s < end_s - 1e-6]

    @cached_property
    def segments(self) -> list[SegmentRecord]:
        return self.library.segments(self.video_id)

    @cached_property
    def frames(self) -> list[FrameRecord]:
        return self.library.frames(self.video_id)

    @cached_property
    def objects(self) -> list[ObjectRecord]:
        """Re-identified objects (empty until the ``objects`` stage is built)."""
        return self.library.objects(self.video_id)

    @cached_property
    def speech(self) -> list[tuple[float, float, str]]:
        """Transcribed speech as (start_s, end_s, text), in time order (empty without the speech stage)."""
        return self.library.speech(self.video_id)

    @cached_property
    def on_screen_text(self) -> list[tuple[float, int, str]]:
        """Text read in the sampled frames as (time_s, segment_id, text), in time order."""
        return self.library.text_in_frames(self.video_id)

    @property
    def coverage(self) -> Coverage | None:
        """What a partial memory has looked at (``vidagent.memory.glance``); None for a full memory."""
        config = self.library.stage_config(self.video_id, "segments")
        glance = config.get(GLANCE_KEY) if config else None
        return Coverage.from_dict(glance) if glance else None

    def refine(self, start_s: float, end_s: float) -> list[Window]:
        """Describe ``[start_s, end_s]`` at the full rate where the memory has not (a partial memory's
        work); returns the windows it described. A full memory has nothing to refine."""
        return []

    @property
    def stages(self) -> list[str]:
        """Names of the stages built for this video."""
        return self.library.stage_names(self.video_id)

    @property
    def segment_count(self) -> int:
        return len(self.segments)

    def segment(self, segment_id: int) -> SegmentRecord:
        return self.segments[segment_id]

    @cached_property
    def _embedding_matrix(self) -> np.ndarray:
        if not self.segments:
            return np.zeros((0, 0), np.float32)
        return np.stack([s.embedding for s in self.segments])

    def rank_segments(self, query_embedding: np.ndarray, top_k: int = 5) -> list[ScoredSegment]:
        """Segments by cosine similarity to a (normalised) query embedding, best first."""
        matrix = self._embedding_matrix
        if matrix.size == 0:
            return []
        scores = matrix @ np.asarray(query_embedding, np.float32).reshape(-1)
        scores[~matrix.any(axis=1)] = -np.inf  # a partial memory's segments not looked at yet hold zeros
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [ScoredSegment(self.segments[i], float(scores[i])) for i in order if np.isfinite(scores[i])]
