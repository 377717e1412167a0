"""Looking at a stretch of a memory that has no pixels: its captions stand for its frames.

A memory imported from a released caption set (``vidagent import``) has captions and nothing to
decode. The tools that would look at frames (``visual_question_answering``, ``frame_description``,
``frame_question_answering``, TraveLER's Extractor) read the captions of the window instead, and
the chat model answers a question from them, as the offline described-frames VQA does from frame
descriptions. Each caption read is its own evidence span, so what a planner read can be counted.
"""

from __future__ import annotations

from typing import Sequence

from vidagent.llm.base import ChatModel, Message
from vidagent.memory.store import SegmentRecord
from vidagent.prompts import prompt
from vidagent.tools.base import Evidence
from vidagent.tools.observed import segment_text



def caption_lines(segments: Sequence[SegmentRecord]) -> list[str]:
    """One line per caption: ``"12.0-13.0 s: caption"`` (speech and on-screen text quoted, if any)."""
    return [f"{s.start_s:.1f}-{s.end_s:.1f} s: {segment_text(s)}" for s in segments]


def segment_evidence(segments: Sequence[SegmentRecord], source_id: str) -> tuple[Evidence, ...]:
    """Each segment read as its own evidence span, with the text it holds (captions, or any memory's segments)."""
    return tuple(Evidence(s.start_s, s.end_s, segment_text(s), source_id) for s in segments)


def answer_from_captions(question: str, segments: Sequence[SegmentRecord], llm: ChatModel) -> str:
    """The chat model's short answer to ``question`` from the captions of ``segments``."""
    answering = prompt("vidagent.tools", "vqa_from_captions")
    request = answering.render(captions="\n".join(caption_lines(segments)), question=question)
    return llm.chat([Message("user", request)], max_tokens=answering.budget, stop=answering.stop).text.strip()
