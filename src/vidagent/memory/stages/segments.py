"""Stage ``segments``: the temporal memory. Per segment (2 s by default): what was seen, said and
shown, with a text embedding of the three; plus clip-level descriptions, where runs of
consecutive segments that read alike are merged into one clip. What was seen is its frames' facts
in words (``frame_words.seen_words``, each distinct wording once); where the ``motion`` stage is
part of the build, it ends with how the picture moves ("Motion: camera pans right; scene cut at
4.2 s."). The embedding is made from the describer's whole sentences (its label, what was seen and
each frame's on-screen text), then the speech and the on-screen text: the text it was made from
since schema 1, so retrieval ranks segments as it did."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from vidagent.memory.stages.base import Rows
from vidagent.memory.store import Library, SegmentRecord, config_key, segments_stage_rows
from vidagent.perception.base import TextEmbedder
from vidagent.perception.frame_words import describer_sentence
from vidagent.video.video import Video

# Cosine between consecutive segment embeddings (E5) at or above which they join one clip. Measured on
# detector descriptions: same scene with small changes 0.97-1.00 (skateboarding_dog, boats); a scene
# change 0.91-0.94 (2.avi: cook -> carrots -> bowl); the dog leaving the skateboard 0.968.
CLIP_MERGE_SIMILARITY = 0.975
MAX_CLIP_SEGMENTS = 15
MOTION_TEMPLATE = "Motion: {phrase}."


class SegmentsStage:
    name = "segments"

    def __init__(self, embedder: TextEmbedder, segment_seconds: float, frames_config: dict[str, Any],
                 speech_config: dict[str, Any], motion_config: dict[str, Any] | None = None) -> None:
        self.embedder = embedder
        self.segment_seconds = segment_seconds
        self.frames_config = frames_config
        self.speech_config = speech_config
        self.motion_config = motion_config  # None: no motion in the descriptions
        self.requires: tuple[str, ...] = ("frames", "speech") + (("motion",) if motion_config is not None else ())

    def config(self) -> dict[str, Any]:
        config = {
            "embedder": self.embedder.name,
            "frames": config_key(self.frames_config),
            "speech": config_key(self.speech_config),
            "clip_merge_similarity": CLIP_MERGE_SIMILARITY,
        }
        if self.motion_config is not None:  # absent otherwise, so libraries built without it stay valid
            config["motion"] = config_key(self.motion_config)
        return config

    def build(self, video: Video, library: Library, progress: bool) -> Rows:
        return self.rows(video, library)

    def rows(self, video: Video, library: Library, *, partial: bool = False,
             known: Mapping[int, SegmentRecord] | None = None) -> Rows:
        """The stage's rows from the stored frames, speech (and motion). ``partial``: the rows of a partial
        memory (``vidagent.memory.glance``): a segment nothing was seen or said in yet keeps empty text and a
        zero embedding (retrieval never ranks it), a segment whose text is that of its ``known`` record keeps
        that record's embedding, and runs are not merged into clips (the gaps between segments seen are
        unknown)."""
        video_id = video.content_hash
        segments = video.segments(self.segment_seconds)
        frames = library.frames(video_id)
        describer = library.describer(video_id)
        label = describer.label if describer else ""
        speech = library.speech(video_id)
        texts = library.text_in_frames(video_id)
        motion = library.motion_phrases(video_id) if self.motion_config is not None else {}
        rows: list[list[Any]] = []
        documents: list[str] = []
        for segment in segments:
            mine = [f for f in frames if f.segment_id == segment.segment_id]
            seen = unique_texts(f.description for f in mine)
            sentences = unique_texts(describer_sentence(f.seen, label) for f in mine)
            said = unique_texts(text for start, end, text in speech if start < segment.end_s and end > segment.start_s)
            shown = unique_texts(text for _, sid, text in texts if sid == segment.segment_id)
            moving = motion.get(segment.segment_id, "")
            if moving:
                seen.append(MOTION_TEMPLATE.format(phrase=moving))
                sentences.append(MOTION_TEMPLATE.format(phrase=moving))
            description, spoken, on_screen = " ".join(seen), " ".join(said), " | ".join(shown)
            rows.append([segment.segment_id, segment.start_s, segment.end_s, description, spoken, on_screen])
            documents.append(" ".join(part for part in (" ".join(sentences), spoken, on_screen) if part))
        if not partial:
            embeddings = np.asarray(self.embedder.embed_passages(documents), np.float32) if documents \
                else np.zeros((0, 0))
            records = [SegmentRecord(*row, vector) for row, vector in zip(rows, embeddings)]
            return segments_stage_rows(records, merge_into_clips(rows, embeddings))
        return segments_stage_rows(self._partial_records(rows, documents, known or {}))

    def _partial_records(self, rows: list[list[Any]], documents: list[str],
                         known: Mapping[int, SegmentRecord]) -> list[SegmentRecord]:
        vectors: dict[int, np.ndarray] = {}
        fresh: list[int] = []
        for index, (row, document) in enumerate(zip(rows, documents)):
            old = known.get(row[0])
            if not document:
                continue
            if old is not None and (old.description, old.speech, old.on_screen_text) == tuple(row[3:6]) \
                    and np.any(old.embedding):
                vectors[index] = old.embedding
            else:
                fresh.append(index)
        if fresh:
            for index, vector in zip(fresh, self.embedder.embed_passages([documents[i] for i in fresh])):
                vectors[index] = np.asarray(vector, np.float32)
        width = len(next(iter(vectors.values()))) if vectors else len(self.embedder.embed_passages([""])[0])
        blank = np.zeros(width, np.float32)
        return [SegmentRecord(*row, vectors.get(index, blank)) for index, row in enumerate(rows)]


def merge_into_clips(rows: list[list[Any]], embeddings: np.ndarray) -> list[tuple[Any, ...]]:
    """Clip rows (clip_id, start_s, end_s, first_segment, last_segment, description) from segment rows
    (segment_id, start_s, end_s, description, ...): a segment joins the running clip when its
    description is the same or its embedding is within ``CLIP_MERGE_SIMILARITY`` of the previous one."""
    clips: list[tuple[Any, ...]] = []
    run: list[int] = []

    def close_run() -> None:
        if run:
            first, last = rows[run[0]], rows[run[-1]]
            description = " ".join(unique_texts(rows[i][3] for i in run))
            clips.append((len(clips), first[1], last[2], first[0], last[0], description))

    for index in range(len(rows)):
        if run:
            previous = run[-1]
            alike = rows[index][3] == rows[previous][3] or \
                float(embeddings[index] @ embeddings[previous]) >= CLIP_MERGE_SIMILARITY
            if not alike or len(run) >= MAX_CLIP_SEGMENTS:
                close_run()
                run = []
        run.append(index)
    close_run()
    return clips


def unique_texts(items: Iterable[str]) -> list[str]:
    """Stripped, non-empty texts in first-seen order, without repeats."""
    seen: dict[str, None] = {}
    for item in items:
        text = item.strip()
        if text:
            seen.setdefault(text, None)
    return list(seen)
