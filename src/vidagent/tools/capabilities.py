"""The capabilities every planner family's tools are forms of, each written once over a video memory
and a window of it (``Span``), returning what it found as a typed result.

VideoAgent's and DoraemonGPT's tools (``tools.temporal``, ``tools.frames``) name a window by segment ids
or seconds; AssistGPT's modules (``tools.assist``) by a source, ``visual[i]``, that covers a window of a
video. Both are thin formatters over the functions here: each turns a result into its own observation
text and evidence. The catalogue (``tools.catalogue``) records which capabilities each tool and module is
a form of, and its contract test checks that every form calls exactly those.

- ``read_span``: the segments of a window, read by the refining rule (``tools.refining``);
- ``localise``: the segments of a window whose descriptions best match a text (text embeddings);
- ``look_and_ask`` / ``ask_frames``: a vision model's answer about frames of a window, or the chat
  model's from the window's captions where the memory has no frames;
- ``describe``: what the frame describer sees in each of a few images;
- ``hear`` / ``match_speech``: the speech of a window, and the line of it that best matches a text.

The forms call these through the module (``capabilities.read_span(...)``), never through a copy of the
name, so one function is all there is to change (``CAPABILITIES`` names them for the catalogue).
``window_frames`` and ``similarities`` are helpers the forms share, not capabilities of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from vidagent.llm.base import ChatModel
from vidagent.memory.coverage import Window
from vidagent.memory.store import SegmentRecord
from vidagent.memory.video_memory import ScoredSegment, VideoMemory
from vidagent.perception.base import FrameDescriber, TextEmbedder, VisualQA
from vidagent.tools.caption_window import answer_from_captions
from vidagent.tools.observed import frame_text
from vidagent.tools.refining import read_stretch, refine_stretch
from vidagent.video.video import SampledFrame

Line = tuple[float, float, str]  # a line of speech: start_s, end_s, text


@dataclass(frozen=True)
class Span:
    """A window of a video, in seconds. The segment-id form names it by its first and last segment
    (``of_segments``: exactly those segments, as an imported memory's captions may overlap); the other
    forms by seconds (``of_times``: every segment that overlaps it)."""

    start_s: float
    end_s: float
    segment_ids: tuple[int, int] | None = None

    @classmethod
    def of_segments(cls, memory: VideoMemory, first: int, last: int) -> Span:
        return cls(memory.segment(first).start_s, memory.segment(last).end_s, (first, last))

    @classmethod
    def of_times(cls, start_s: float, end_s: float) -> Span:
        return cls(start_s, end_s)

    def segments(self, memory: VideoMemory) -> list[SegmentRecord]:
        """The memory's segments in the span, in time order."""
        if self.segment_ids is not None:
            first, last = self.segment_ids
            return memory.segments[first:last + 1]
        return memory.segments_between(self.start_s, self.end_s)


# -- read a stretch ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reading:
    """The segments read of a span, and the windows a partial memory described in full for the read."""

    segments: list[SegmentRecord]
    refined: list[Window]


def read_span(memory: VideoMemory, span: Span, whole: int) -> Reading:
    """The span's segments: read whole (refined first) when at most ``whole`` of them, else skimmed."""
    segments, refined = read_stretch(memory, span.segments(memory), whole)
    return Reading(segments, refined)


# -- localise by text -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Localised:
    """What a text was localised among: the span's segments (read after refining), the segments
    best matching it there (best first), and the windows refined for the search."""

    segments: list[SegmentRecord]
    ranked: list[ScoredSegment]
    refined: list[Window]


def localise(memory: VideoMemory, embedder: TextEmbedder, description: str, span: Span | None = None, *,
             limit: int | None = None, whole: int = 0) -> Localised:
    """The segments of ``span`` (None: the whole video) whose embeddings best match ``description``, at
    most ``limit`` (None: all); a span of at most ``whole`` segments is described in full first."""
    refined = [] if span is None else refine_stretch(memory, span.segments(memory), whole)
    segments = memory.segments if span is None else span.segments(memory)  # read again after refining
    if not segments:
        return Localised([], [], refined)
    ranked = memory.rank_segments(embedder.embed_queries([description])[0], memory.segment_count)
    if span is not None:
        inside = {s.segment_id for s in segments}
        ranked = [r for r in ranked if r.segment.segment_id in inside]
    return Localised(segments, ranked[:limit], refined)


# -- look and ask -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Looked:
    """A visual question's answer: the frames looked at, the captions read instead (None: frames were
    looked at), the answer, and what the vision model described seeing."""

    frames: list[SampledFrame]
    captions: list[SegmentRecord] | None
    answer: str
    description: str = ""


def ask_frames(vqa: VisualQA, question: str, frames: Sequence[SampledFrame]) -> Looked:
    """The vision model's answer to ``question`` about ``frames``."""
    result = vqa.answer(question, frames)
    return Looked(list(frames), None, result.answer, result.description)


def look_and_ask(memory: VideoMemory, span: Span, question: str, *, vqa: VisualQA, llm: ChatModel,
                 frames: Callable[[], list[SampledFrame]]) -> Looked:
    """The answer to ``question`` about ``span``: the vision model's about the ``frames`` (decoded only
    when looked at), or, for a memory without frames, the chat model's from the span's captions."""
    if not memory.has_pixels:
        read = span.segments(memory)
        return Looked([], read, answer_from_captions(question, read, llm))
    return ask_frames(vqa, question, frames())


def window_frames(memory: VideoMemory, times: Sequence[float], max_side: int) -> list[SampledFrame]:
    """The frames at ``times`` (seconds), each at most ``max_side`` pixels on its longer side."""
    return list(memory.video.frames_at(times, max_side=max_side))


# -- describe ---------------------------------------------------------------------------------------
def describe(describer: FrameDescriber, images: Sequence[object]) -> list[str]:
    """What the frame describer sees in each image, as one text each (on-screen text quoted)."""
    return [frame_text(description) for description in describer.describe(list(images))]


# -- hear -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Heard:
    """The speech of a span: whether the video has sound at all, and the lines said in the span."""

    has_audio: bool
    lines: list[Line]


def hear(memory: VideoMemory, span: Span) -> Heard:
    """The lines of speech that overlap ``span`` (empty ones left out); none for a video without sound."""
    if not memory.video.info.has_audio:
        return Heard(False, [])
    return Heard(True, _said(memory, span))


@dataclass(frozen=True)
class SpeechMatch:
    """The line of a span's speech that best matches a text, and its similarity."""

    line: Line
    score: float


def match_speech(memory: VideoMemory, embedder: TextEmbedder, text: str, span: Span) -> SpeechMatch | None:
    """The line said in ``span`` most like ``text`` (None: nothing was said there)."""
    lines = _said(memory, span)
    if not lines:
        return None
    scores = similarities(embedder, text, [line[2] for line in lines])
    best = int(np.argmax(scores))
    return SpeechMatch(lines[best], scores[best])


def _said(memory: VideoMemory, span: Span) -> list[Line]:
    return [line for line in memory.speech if line[1] > span.start_s and line[0] < span.end_s and line[2].strip()]


def similarities(embedder: TextEmbedder, query: str, texts: Sequence[str]) -> list[float]:
    """The similarity of ``query`` to each of ``texts`` (text embeddings, as passages)."""
    query_vector = embedder.embed_queries([query])[0]
    return [float(v) for v in embedder.embed_passages(list(texts)) @ query_vector]


# every capability by the name the catalogue gives it
CAPABILITIES: dict[str, Callable[..., object]] = {
    "read_span": read_span, "localise": localise, "look_and_ask": look_and_ask, "ask_frames": ask_frames,
    "describe": describe, "hear": hear, "match_speech": match_speech,
}
