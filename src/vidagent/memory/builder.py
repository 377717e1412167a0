"""Builds a video's temporal memory in stages, each cached by (video content hash, stage config).

Stages: ``frames`` (sampled frames described, on-screen text read), ``speech`` (audio
transcribed), ``segments`` (per 2-second segment: description, speech, text, embedding).
A finished stage is never recomputed; a stage interrupted half-way leaves nothing behind.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import numpy as np
from tqdm import tqdm

from vidagent.config import Settings
from vidagent.memory.store import Library, config_key
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.suite import Perception
from vidagent.video.video import Segment, Video

FRAME_MAX_SIDE = 768
DESCRIBE_BATCH = 4
ALL_STAGES = ("frames", "speech", "segments")


class MemoryBuilder:
    """Builds and reuses memory for videos in one library."""

    def __init__(self, library: Library, perception: Perception, settings: Settings) -> None:
        self.library = library
        self.perception = perception
        self.settings = settings

    # -- stage configurations (what a cached stage depends on) -------------------------------
    def frames_config(self) -> dict[str, Any]:
        return {
            "describer": self.perception.describer.name,
            "frames_per_segment": self.settings.frames_per_segment,
            "segment_seconds": self.settings.segment_seconds,
            "max_side": FRAME_MAX_SIDE,
        }

    def speech_config(self) -> dict[str, Any]:
        return {"speech_to_text": self.perception.speech.name}

    def segments_config(self) -> dict[str, Any]:
        return {
            "embedder": self.perception.embedder.name,
            "frames": config_key(self.frames_config()),
            "speech": config_key(self.speech_config()),
        }

    # -- building ---------------------------------------------------------------------------
    def build(self, video: Video, *, progress: bool = True) -> VideoMemory:
        """Build whatever stages are missing for ``video`` and return its memory."""
        video_id = video.content_hash
        self.library.add_video(video.info)
        plan: list[tuple[str, dict[str, Any], Callable[[Video, bool], dict[str, list[tuple[Any, ...]]]]]] = [
            ("frames", self.frames_config(), self._build_frames),
            ("speech", self.speech_config(), self._build_speech),
            ("segments", self.segments_config(), self._build_segments),
        ]
        for stage, config, run in plan:
            if self.library.has_stage(video_id, stage, config):
                continue
            started = time.perf_counter()
            rows = run(video, progress)
            self.library.write_stage(video_id, stage, config, rows, time.perf_counter() - started)
        return VideoMemory(video, self.library)

    def _frame_times(self, segments: list[Segment]) -> list[tuple[float, int]]:
        per = self.settings.frames_per_segment
        return [
            (round(s.start_s + (j + 0.5) * (s.end_s - s.start_s) / per, 3), s.segment_id)
            for s in segments
            for j in range(per)
        ]

    def _build_frames(self, video: Video, progress: bool) -> dict[str, list[tuple[Any, ...]]]:
        segments = video.segments(self.settings.segment_seconds)
        planned = self._frame_times(segments)
        segment_of = dict(planned)
        frame_rows: list[tuple[Any, ...]] = []
        text_rows: list[tuple[Any, ...]] = []
        bar = tqdm(total=len(planned), desc="describing frames", unit="frame", disable=not progress, leave=False)
        batch: list[tuple[float, np.ndarray]] = []

        def flush() -> None:
            descriptions = self.perception.describer.describe([image for _, image in batch])
            for (time_s, _), described in zip(batch, descriptions):
                segment_id = segment_of[time_s]
                frame_rows.append((time_s, segment_id, described.text, json.dumps(list(described.objects))))
                for box in described.text_boxes:
                    text_rows.append((time_s, segment_id, box.text, *box.box, box.score))
            bar.update(len(batch))
            batch.clear()

        try:
            for frame in video.frames_at([t for t, _ in planned], max_side=FRAME_MAX_SIDE):
                batch.append((frame.time_s, frame.image))
                if len(batch) >= DESCRIBE_BATCH:
                    flush()
            if batch:
                flush()
        finally:
            bar.close()
        return {"frames": frame_rows, "text_in_frame": text_rows}

    def _build_speech(self, video: Video, progress: bool) -> dict[str, list[tuple[Any, ...]]]:
        audio = video.audio()
        if audio is None or audio.size == 0:
            return {"speech": []}
        segments = self.perception.speech.transcribe(audio)
        return {"speech": [(s.start_s, s.end_s, s.text) for s in segments]}

    def _build_segments(self, video: Video, progress: bool) -> dict[str, list[tuple[Any, ...]]]:
        video_id = video.content_hash
        segments = video.segments(self.settings.segment_seconds)
        frames = self.library.frames(video_id)
        speech = self.library.speech(video_id)
        texts = self.library.text_in_frames(video_id)
        rows: list[tuple[Any, ...]] = []
        documents: list[str] = []
        for segment in segments:
            seen = _unique(f.description for f in frames if f.segment_id == segment.segment_id)
            said = _unique(text for start, end, text in speech if start < segment.end_s and end > segment.start_s)
            shown = _unique(text for _, sid, text in texts if sid == segment.segment_id)
            description, spoken, on_screen = " ".join(seen), " ".join(said), " | ".join(shown)
            rows.append([segment.segment_id, segment.start_s, segment.end_s, description, spoken, on_screen])
            documents.append(" ".join(part for part in (description, spoken, on_screen) if part))
        embeddings = self.perception.embedder.embed_passages(documents)
        return {"segments": [(*row, np.asarray(vec, np.float32).tobytes()) for row, vec in zip(rows, embeddings)]}


def _unique(items: Any) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        text = item.strip()
        if text:
            seen.setdefault(text, None)
    return list(seen)
