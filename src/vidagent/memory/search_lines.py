"""The lines of one video's memory that the library search indexes: each a moment (a span of the video) with the
words the memory holds for it and the kind of evidence they are.

Kinds (``LINE_KINDS``):

* ``object``: a re-identified object of the object memory: its category, what it looks like and does, and
  the spans it was seen in (``object_segments`` merged), e.g. ``dog: white and brown dog, large``.
* ``action``: what an object does over a span (``actions``), e.g. ``person sits down``.
* ``text``: on-screen text (OCR), one line per text and run of frames it was read in.
* ``speech``: one line per transcribed utterance.
* ``segment``: the temporal memory's descriptions (a captioner's sentences, the offline describer's words or an
  imported caption), consecutive segments with the same words merged into one line.

A segment line reuses the embedding the memory already holds for it when that embedding came from the index's
own text embedder (``stored_vector``); every other line is embedded when the index takes the video in. A video's
lines are bounded (``MAX_LINES_PER_KIND``): a ticker that changes every frame cannot fill the index.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np

from vidagent.memory.store import Library

LINE_KINDS: tuple[str, ...] = ("object", "action", "text", "speech", "segment")
MAX_LINES_PER_KIND = 2000  # per video: a memory with more keeps its longest-lasting lines of that kind
MAX_LINE_CHARS = 600  # the words of one line beyond this are cut (the embedder reads ~512 tokens anyway)
TEXT_RUN_GAP_S = 2.5  # two readings of the same text further apart than this are two lines


@dataclass(frozen=True)
class SearchLine:
    """One moment of a video's memory, as the library search keeps it."""

    kind: str
    start_s: float
    end_s: float
    text: str
    category: str | None = None  # an object's or action's category (an exact-match key), else None
    spans: tuple[tuple[float, float], ...] = ()  # where it was seen, when more precise than start-end
    stored_vector: np.ndarray | None = None  # an embedding the memory already holds for this text

    def detail(self) -> str:
        """What the index keeps beside the text, as JSON (the spans)."""
        return json.dumps({"spans": [[round(a, 2), round(b, 2)] for a, b in self.spans]} if self.spans else {})


def video_lines(library: Library, video_id: str, embedder_name: str) -> list[SearchLine]:
    """Every line of ``video_id``'s memory in ``library`` (see the module's description), in kind order."""
    segments_config = library.stage_config(video_id, "segments") or {}
    reuse = segments_config.get("embedder") == embedder_name
    lines = (_object_lines(library, video_id) + _action_lines(library, video_id) + _text_lines(library, video_id)
             + _speech_lines(library, video_id) + _segment_lines(library, video_id, reuse))
    return lines


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS - 3] + "..."


def _longest(lines: list[SearchLine]) -> list[SearchLine]:
    if len(lines) <= MAX_LINES_PER_KIND:
        return lines
    kept = sorted(lines, key=lambda line: line.end_s - line.start_s, reverse=True)[:MAX_LINES_PER_KIND]
    return sorted(kept, key=lambda line: line.start_s)


def merged_spans(spans: list[tuple[float, float]], gap_s: float = 0.01) -> tuple[tuple[float, float], ...]:
    """``spans`` sorted, those that touch or overlap (within ``gap_s``) merged."""
    merged: list[list[float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1] + gap_s:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return tuple((a, b) for a, b in merged)


def _object_lines(library: Library, video_id: str) -> list[SearchLine]:
    rows = library.rows(
        """SELECT o.object_id, o.category, o.first_s, o.last_s, o.description, d.line, d.caption
           FROM objects o LEFT JOIN object_descriptions d ON d.video_id = o.video_id AND d.object_id = o.object_id
           WHERE o.video_id = ? ORDER BY o.object_id""", (video_id,))
    spans: dict[int, list[tuple[float, float]]] = {}
    for object_id, start, end in library.rows(
            "SELECT object_id, first_s, last_s FROM object_segments WHERE video_id = ?", (video_id,)):
        spans.setdefault(object_id, []).append((start, end))
    lines = []
    for object_id, category, first_s, last_s, description, line, caption in rows:
        words = "; ".join(part for part in (line or description, caption) if part)
        lines.append(SearchLine("object", first_s, last_s, _clip(f"{category}: {words}"), category,
                                merged_spans(spans.get(object_id, [(first_s, last_s)]), gap_s=2.01)))
    return _longest(lines)


def _action_lines(library: Library, video_id: str) -> list[SearchLine]:
    rows = library.rows(
        """SELECT o.category, a.verb, a.start_s, a.end_s FROM actions a
           JOIN objects o ON o.video_id = a.video_id AND o.object_id = a.object_id
           WHERE a.video_id = ? ORDER BY a.start_s""", (video_id,))
    return _longest([SearchLine("action", start, end, _clip(f"{category} {verb}"), category)
                     for category, verb, start, end in rows])


def _text_lines(library: Library, video_id: str) -> list[SearchLine]:
    runs: dict[str, list[list[float]]] = {}
    for time_s, _segment_id, text in library.text_in_frames(video_id):
        key = " ".join(text.split())
        if not key:
            continue
        spans = runs.setdefault(key, [])
        if spans and time_s - spans[-1][1] <= TEXT_RUN_GAP_S:
            spans[-1][1] = max(spans[-1][1], time_s)
        else:
            spans.append([time_s, time_s])
    lines = [SearchLine("text", start, end, _clip(text)) for text, spans in runs.items() for start, end in spans]
    return _longest(sorted(lines, key=lambda line: line.start_s))


def _speech_lines(library: Library, video_id: str) -> list[SearchLine]:
    return _longest([SearchLine("speech", start, end, _clip(text))
                     for start, end, text in library.speech(video_id) if text.strip()])


def _segment_lines(library: Library, video_id: str, reuse_vectors: bool) -> list[SearchLine]:
    lines: list[SearchLine] = []
    for record in library.segments(video_id):
        text = _clip(record.description)
        if not text:
            continue
        last = lines[-1] if lines else None
        if last is not None and last.text == text and abs(last.end_s - record.start_s) < 0.01:
            lines[-1] = replace(last, end_s=record.end_s)  # the same words go on: one longer moment
            continue
        vector = record.embedding if reuse_vectors and record.embedding.size and np.any(record.embedding) else None
        lines.append(SearchLine("segment", record.start_s, record.end_s, text, stored_vector=vector))
    return _longest(lines)
