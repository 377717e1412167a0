"""Builds a video's memory in stages, each cached by (video content hash, stage, stage config).

A finished stage is never recomputed. Frame stages share one decoding pass: the union of their
sample times is decoded once and every frame is handed to each stage that asked for it. Each
chunk of processed frames is checkpointed, so a killed build resumes where it stopped; the
stage's rows are written in one transaction when it finishes.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from tqdm import tqdm

from vidagent.config import Settings
from vidagent.memory.stages.base import FrameStage, Stage
from vidagent.memory.stages.frames import FramesStage
from vidagent.memory.stages.segments import SegmentsStage
from vidagent.memory.stages.speech import SpeechStage
from vidagent.memory.store import Library
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.suite import Perception
from vidagent.video.video import SampledFrame, Video

TEMPORAL_STAGES = ("frames", "speech", "segments")  # what the temporal tools need
ALL_STAGES = ("frames", "speech", "segments", "objects")


class MemoryBuilder:
    """Builds and reuses memory for videos in one library."""

    def __init__(self, library: Library, perception: Perception, settings: Settings) -> None:
        self.library = library
        self.perception = perception
        self.settings = settings
        self._stages: dict[str, Stage | FrameStage] = {}

    def stage(self, name: str) -> Stage | FrameStage:
        """The stage called ``name`` (made on first use; models load only when it runs)."""
        if name not in ALL_STAGES:
            raise ValueError(f"unknown memory stage {name!r}; stages are {', '.join(ALL_STAGES)}")
        if name not in self._stages:
            self._stages[name] = self._make_stage(name)
        return self._stages[name]

    def _make_stage(self, name: str) -> Stage | FrameStage:
        settings = self.settings
        if name == "frames":
            return FramesStage(self.perception.describer, settings.segment_seconds, settings.frames_per_segment)
        if name == "speech":
            return SpeechStage(self.perception.speech)
        if name == "segments":
            return SegmentsStage(self.perception.embedder, settings.segment_seconds,
                                 self.stage("frames").config(), self.stage("speech").config())
        from vidagent.memory.stages.objects import ObjectsStage

        return ObjectsStage(self.perception, settings)

    def missing_stages(self, video: Video, stages: Sequence[str] = TEMPORAL_STAGES) -> list[str]:
        """The stages (with their requirements) that are not built yet for ``video``."""
        video_id = video.content_hash
        return [name for name in self._with_requirements(stages)
                if not self.library.has_stage(video_id, name, self.stage(name).config())]

    def build(self, video: Video, stages: Sequence[str] = TEMPORAL_STAGES, *, progress: bool = True) -> VideoMemory:
        """Build whichever of ``stages`` (and what they require) are missing, and return the memory."""
        self.library.add_video(video.info)
        missing = self.missing_stages(video, stages)
        frame_stages = [self.stage(name) for name in missing if _is_frame_stage(self.stage(name))]
        if frame_stages:
            self._build_frame_stages(video, frame_stages, progress)  # type: ignore[arg-type]
        for name in missing:
            stage = self.stage(name)
            if _is_frame_stage(stage):
                continue
            started = time.perf_counter()
            rows = stage.build(video, self.library, progress)  # type: ignore[union-attr]
            self.library.write_stage(video.content_hash, name, stage.config(), rows, time.perf_counter() - started)
        return VideoMemory(video, self.library)

    def _with_requirements(self, stages: Sequence[str]) -> list[str]:
        wanted: set[str] = set()

        def add(name: str) -> None:
            if name not in wanted:
                wanted.add(name)
                for required in self.stage(name).requires:
                    add(required)

        for name in stages:
            add(name)
        return [name for name in ALL_STAGES if name in wanted]

    def _build_frame_stages(self, video: Video, stages: list[FrameStage], progress: bool) -> None:
        video_id = video.content_hash
        configs = {stage.name: stage.config() for stage in stages}
        results: dict[str, dict[float, Any]] = {}
        todo: dict[str, set[float]] = {}
        for stage in stages:
            done: dict[float, Any] = {}
            for chunk in self.library.checkpoints(video_id, stage.name, configs[stage.name]):
                done.update((float(t), result) for t, result in chunk)
            results[stage.name] = done
            todo[stage.name] = {t for t in stage.frame_times(video) if t not in done}
        seconds = {stage.name: 0.0 for stage in stages}
        pending: dict[str, list[SampledFrame]] = {stage.name: [] for stage in stages}

        def flush(stage: FrameStage) -> None:
            frames = pending[stage.name]
            if not frames:
                return
            started = time.perf_counter()
            outputs = stage.process(frames)
            seconds[stage.name] += time.perf_counter() - started
            chunk = [[frame.time_s, output] for frame, output in zip(frames, outputs)]
            self.library.save_checkpoint(video_id, stage.name, configs[stage.name], frames[0].time_s, chunk)
            results[stage.name].update((frame.time_s, output) for frame, output in zip(frames, outputs))
            bar.update(len(frames))
            pending[stage.name] = []

        wanted_times = sorted(set().union(*todo.values()))
        names = ", ".join(stage.name for stage in stages)
        total = sum(len(todo[s.name]) + len(results[s.name]) for s in stages)
        bar = tqdm(total=total, initial=total - sum(len(t) for t in todo.values()), unit="frame",
                   desc=f"indexing {video.path.name} ({names})", disable=not progress, leave=False)
        try:
            if wanted_times:
                max_side = max(stage.max_side for stage in stages)
                for frame in video.frames_at(wanted_times, max_side=max_side):
                    for stage in stages:
                        if frame.time_s in todo[stage.name]:
                            pending[stage.name].append(frame)
                            if len(pending[stage.name]) >= stage.batch_size:
                                flush(stage)
                for stage in stages:
                    flush(stage)
        finally:
            bar.close()
        for stage in stages:
            started = time.perf_counter()
            rows = stage.finish(video, self.library, results[stage.name])
            elapsed = seconds[stage.name] + time.perf_counter() - started
            self.library.write_stage(video_id, stage.name, configs[stage.name], rows, elapsed)


def _is_frame_stage(stage: Stage | FrameStage) -> bool:
    return hasattr(stage, "process")
