"""The capabilities written once over a memory and a window (vidagent.tools.capabilities), on a small
stand-in memory: a span named by segment ids reads exactly those segments (imported captions may
overlap), one named by seconds every segment that overlaps it; localising ranks only inside the span;
hearing says when a video has no sound; a memory without frames answers from its captions."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
from fakes.llm import ScriptedLLM

from vidagent.memory.store import SegmentRecord
from vidagent.memory.video_memory import ScoredSegment
from vidagent.tools import capabilities
from vidagent.tools.capabilities import Span


def _segment(i: int, start: float, end: float, text: str, vector: tuple[float, float]) -> SegmentRecord:
    return SegmentRecord(i, start, end, text, "", "", np.asarray(vector, np.float32))


@dataclass
class StandIn:
    """What the capabilities read of a memory: overlapping captions, speech, no frames."""

    segments: list[SegmentRecord]
    speech: list[tuple[float, float, str]] = field(default_factory=list)
    has_audio: bool = True
    has_pixels: bool = False
    coverage: None = None

    @property
    def segment_count(self) -> int:
        return len(self.segments)

    @property
    def video(self) -> SimpleNamespace:
        return SimpleNamespace(info=SimpleNamespace(has_audio=self.has_audio))

    def segment(self, segment_id: int) -> SegmentRecord:
        return self.segments[segment_id]

    def segments_between(self, start_s: float, end_s: float) -> list[SegmentRecord]:
        return [s for s in self.segments if s.end_s > start_s + 1e-6 and s.start_s < end_s - 1e-6]

    def refine(self, start_s: float, end_s: float) -> list:
        return []

    def rank_segments(self, query: np.ndarray, top_k: int = 5) -> list[ScoredSegment]:
        scored = sorted(self.segments, key=lambda s: -float(s.embedding @ query))
        return [ScoredSegment(s, float(s.embedding @ query)) for s in scored[:top_k]]


class Embedder:
    def embed_queries(self, texts):
        return np.asarray([[1.0, 0.0] if "dog" in t else [0.0, 1.0] for t in texts], np.float32)

    embed_passages = embed_queries


MEMORY = StandIn([_segment(0, 0.0, 4.0, "a dog runs", (1.0, 0.0)),
                  _segment(1, 2.0, 6.0, "a cat sleeps", (0.0, 1.0)),
                  _segment(2, 6.0, 8.0, "a dog sits", (0.9, 0.1))],
                 speech=[(0.5, 1.5, "hello"), (3.0, 4.0, "  "), (6.5, 7.5, "good dog")])


def test_a_span_named_by_segment_ids_reads_exactly_those_and_one_named_by_seconds_every_overlapping_one():
    assert [s.segment_id for s in Span.of_segments(MEMORY, 1, 1).segments(MEMORY)] == [1]
    assert [s.segment_id for s in Span.of_times(2.0, 6.0).segments(MEMORY)] == [0, 1]
    reading = capabilities.read_span(MEMORY, Span.of_segments(MEMORY, 0, 2), whole=5)
    assert [s.segment_id for s in reading.segments] == [0, 1, 2] and reading.refined == []


def test_localising_ranks_only_inside_the_span_and_the_whole_video_without_one():
    inside = capabilities.localise(MEMORY, Embedder(), "a dog", Span.of_times(4.5, 8.0))
    assert [r.segment.segment_id for r in inside.ranked] == [2, 1]
    everywhere = capabilities.localise(MEMORY, Embedder(), "a dog", limit=2)
    assert [r.segment.segment_id for r in everywhere.ranked] == [0, 2]


def test_hearing_leaves_out_empty_lines_and_says_when_there_is_no_sound():
    heard = capabilities.hear(MEMORY, Span.of_times(0.0, 5.0))
    assert heard.has_audio and heard.lines == [(0.5, 1.5, "hello")]
    assert capabilities.hear(StandIn([], has_audio=False), Span.of_times(0.0, 5.0)).has_audio is False
    match = capabilities.match_speech(MEMORY, Embedder(), "the dog", Span.of_times(0.0, 8.0))
    assert match is not None and match.line == (6.5, 7.5, "good dog")
    assert capabilities.match_speech(MEMORY, Embedder(), "the dog", Span.of_times(4.1, 6.0)) is None


def test_a_memory_without_frames_answers_from_the_captions_of_the_span_and_decodes_nothing():
    llm = ScriptedLLM(["a dog"])

    def frames():
        raise AssertionError("a memory without frames decodes none")

    looked = capabilities.look_and_ask(MEMORY, Span.of_segments(MEMORY, 2, 2), "What sits?", vqa=None, llm=llm,
                                       frames=frames)
    assert looked.answer == "a dog" and looked.frames == []
    assert [s.segment_id for s in looked.captions or []] == [2]
    assert "a dog sits" in llm.requests[0][-1].content
