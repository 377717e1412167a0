"""VideoAgent's tools over the temporal memory: caption_retrieval, segment_localization,
visual_question_answering (what they do follows the paper's appendix C; their descriptions are
cut to what a planner needs, since every step of a ReAct chain re-reads them). Each is the segment-id
form of a capability written once in ``vidagent.tools.capabilities`` (read a span, localise, look and
ask), of which AssistGPT's modules are the ``visual[i]`` form: here only the ids and the observation."""

from __future__ import annotations

from dataclasses import dataclass, field

from vidagent.config import ToolShapes
from vidagent.llm.base import ChatModel
from vidagent.memory.store import SegmentRecord
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.base import TextEmbedder, VisualQA
from vidagent.tools import capabilities
from vidagent.tools.base import Evidence, Observation, Parameter, Tool
from vidagent.tools.declaration import declared, made
from vidagent.tools.capabilities import Span
from vidagent.tools.caption_window import segment_evidence
from vidagent.tools.observed import lines, quote, segment_text
from vidagent.tools.refining import refined_artifact
from vidagent.video.sampling import midpoints, spread_evenly
from vidagent.video.video import SampledFrame


@dataclass
class TemporalTools:
    """Builds the temporal-memory tools of one video."""

    memory: VideoMemory
    embedder: TextEmbedder
    vqa: VisualQA
    llm: ChatModel
    shapes: ToolShapes = field(default_factory=ToolShapes)  # how much each tool reads and shows

    def tools(self) -> list[Tool]:
        return [
            made(
                self.caption_retrieval,
                f"the descriptions of segments start_segment to end_segment ({self.shapes.caption_lines} at most).",
                (Parameter("start_segment", int, "first segment id"), Parameter("end_segment", int, "last segment id")),
            ),
            made(
                self.segment_localization,
                f"the {self.shapes.localized_segments} segments whose descriptions best match the description.",
                (Parameter("description", str, "what to look for"),),
            ),
            made(
                self.visual_question_answering,
                "looks at segments segment_id-1 to segment_id+1; returns what it saw and its answer.",
                (Parameter("question", str, "the question to ask"), Parameter("segment_id", int, "segment id")),
            ),
        ]

    # -- tools: formatters over the capabilities (vidagent.tools.capabilities) -----------------
    @declared("segments", "descriptions speech text", refines=True, of="read_span", sets="videoagent", does="overview")
    def caption_retrieval(self, start_segment: int, end_segment: int) -> Observation:
        count = self.memory.segment_count
        if count == 0:
            return Observation("The video memory holds no segments.", is_error=True)
        start, end = sorted((start_segment, end_segment))
        notes = []
        if start >= count or end < 0:
            return Observation(f"No such segments: ids run from 0 to {count - 1}.", is_error=True)
        start, end = max(0, start), min(count - 1, end)
        shown = self.shapes.caption_lines
        # read whole: a partial memory describes it in full first; skimmed: among the segments it has looked at
        reading = capabilities.read_span(self.memory, Span.of_segments(self.memory, start, end), shown)
        segments = reading.segments
        if len(segments) > shown:  # a wide range is skimmed: ``shown`` segments evenly spread over it
            segments = spread_evenly(segments, shown)
            notes.append(f"({end - start + 1} segments in {start}-{end}: {shown} of them, evenly spread, "
                         f"are shown; ask a range of at most {shown} to read every one)")
        lines = notes + _segment_runs(segments)
        return Observation("\n".join(lines), evidence=segment_evidence(segments, self.memory.video_id),
                           artifacts=refined_artifact(reading.refined))

    @declared("segments", "descriptions speech text", of="localise", sets="videoagent")
    def segment_localization(self, description: str) -> Observation:
        count = self.memory.segment_count
        if count == 0:
            return Observation("The video memory holds no segments.", is_error=True)
        ranked = capabilities.localise(self.memory, self.embedder, description,
                                       limit=self.shapes.localized_segments).ranked
        lines = [f"There are {count} segments in total (ids 0-{count - 1}). Most similar to '{description}':"]
        lines += [f"{_segment_line(r.segment, words=self.shapes.snippet_words)} [similarity {r.score:.2f}]" for r in ranked]
        return Observation("\n".join(lines), evidence=segment_evidence([r.segment for r in ranked], self.memory.video_id))

    @declared("segments", "pixels model", refines=True, of="look_and_ask", sets="videoagent", does="looks")
    def visual_question_answering(self, question: str, segment_id: int) -> Observation:
        count = self.memory.segment_count
        if count == 0:
            return Observation("The video memory holds no segments.", is_error=True)
        if not 0 <= segment_id < count:
            return Observation(f"No segment {segment_id}: ids run from 0 to {count - 1}.", is_error=True)
        first = self.memory.segment(max(0, segment_id - 1))
        last = self.memory.segment(min(count - 1, segment_id + 1))
        span = Span.of_segments(self.memory, first.segment_id, last.segment_id)
        refined = self.memory.refine(span.start_s, span.end_s)  # what it looks at, described in full
        looked = capabilities.look_and_ask(self.memory, span, question, vqa=self.vqa, llm=self.llm,
                                           frames=lambda: self._frames(span))
        if looked.captions is not None:  # a memory of captions only: they stand for the frames
            return Observation(f"Segments {first.segment_id}-{last.segment_id} ({first.start_s:.1f}-{last.end_s:.1f} s),"
                               f" read from their captions (no frames).\nAnswer: {quote(looked.answer)}",
                               evidence=segment_evidence(looked.captions, self.memory.video_id))
        text = f"Segments {first.segment_id}-{last.segment_id} ({first.start_s:.1f}-{last.end_s:.1f} s).\n" \
               f"Description: {lines(looked.description)}\nAnswer: {quote(looked.answer)}"
        return Observation(text, evidence=(Evidence(first.start_s, last.end_s, looked.answer, self.memory.video_id,
                                                     kind="model"),),
                           artifacts={"frame_times": [f.time_s for f in looked.frames]} | refined_artifact(refined))

    def _frames(self, span: Span) -> list[SampledFrame]:
        """What visual_question_answering looks at: frames at the midpoints of equal parts of the span."""
        samples = max(2, round((span.end_s - span.start_s) * self.shapes.vqa_frames_per_second))
        return capabilities.window_frames(self.memory, midpoints(span.start_s, span.end_s, samples),
                                          self.shapes.frame_max_side)


def _segment_runs(segments: list[SegmentRecord]) -> list[str]:
    """One line per run of adjacent segments that read exactly alike ("Segments 3-5 (6.0-12.0 s): ...")."""
    runs: list[tuple[list[SegmentRecord], str]] = []
    for segment in segments:
        text = segment_text(segment)
        if runs and runs[-1][1] == text and runs[-1][0][-1].segment_id + 1 == segment.segment_id:
            runs[-1][0].append(segment)
        else:
            runs.append(([segment], text))
    out = []
    for members, text in runs:
        first, last = members[0], members[-1]
        ids = f"Segment {first.segment_id}" if first is last else f"Segments {first.segment_id}-{last.segment_id}"
        out.append(f"{ids} ({first.start_s:.1f}-{last.end_s:.1f} s): {text}")
    return out


def _segment_line(segment: SegmentRecord, words: int | None = None) -> str:
    return f"Segment {segment.segment_id} ({segment.start_s:.1f}-{segment.end_s:.1f} s): {segment_text(segment, words)}"
