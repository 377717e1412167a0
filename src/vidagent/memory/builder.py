"""Builds a video's memory in stages, each cached by (video content hash, stage, stage config).

A finished stage is never recomputed. Frame stages share one decoding pass: the union of their
sample times is decoded once and every frame is handed to each stage that asked for it. Each
chunk of processed frames is checkpointed, so a killed build resumes where it stopped; the
stage's rows are written in one transaction when it finishes.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from vidagent.config import Settings
from vidagent.memory.frame_pipeline import FramePipeline
from vidagent.memory.stages.base import FrameStage, Rows, Stage
from vidagent.memory.stages.frames import FramesStage
from vidagent.memory.stages.motion import MotionStage
from vidagent.memory.stages.segments import SegmentsStage
from vidagent.memory.stages.speech import SpeechStage
from vidagent.memory.store import Library
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.suite import Perception
from vidagent.video.change import ChangeLimits, SparseRate
from vidagent.video.video import Video

log = logging.getLogger(__name__)

TEMPORAL_STAGES = ("frames", "speech", "segments")  # what the temporal tools need
ALL_STAGES = ("frames", "speech", "segments", "objects")
# Every stage, in build order: "motion" is built as a requirement of "segments" when
# Settings.perception has "motion" (it adds to the segment descriptions), never on its own; "actions"
# and "descriptions" are built whenever "objects" is (the object memory is the three: OBJECT_STAGES), and
# "camera" (the camera's motion at the objects' sample times, in the objects' decoding pass) as a
# requirement of "actions".
STAGE_ORDER = ("frames", "speech", "motion", "segments", "objects", "camera", "actions", "descriptions")
OBJECT_STAGES = ("objects", "actions", "descriptions")
# stages built with a stage whenever it is asked for
FOLLOWERS: dict[str, tuple[str, ...]] = {"objects": ("actions", "descriptions")}


class MemoryBuilder:
    """Builds and reuses memory for videos in one library."""

    def __init__(self, library: Library, perception: Perception, settings: Settings) -> None:
        self.library = library
        self.perception = perception
        self.settings = settings
        self._stages: dict[str, Stage | FrameStage] = {}
        self.last_reused: dict[str, int] = {}  # frame stage -> frames that reused a result in the last build

    def stage(self, name: str) -> Stage | FrameStage:
        """The stage called ``name`` (made on first use; models load only when it runs)."""
        if name not in STAGE_ORDER:
            raise ValueError(f"unknown memory stage {name!r}; stages are {', '.join(STAGE_ORDER)}")
        if name not in self._stages:
            self._stages[name] = self._make_stage(name)
        return self._stages[name]

    def _make_stage(self, name: str) -> Stage | FrameStage:
        settings = self.settings
        if name == "frames":
            return FramesStage(self.perception.describer, settings.segment_seconds, settings.frames_per_segment,
                               reuse=self._reuse())
        if name == "speech":
            return SpeechStage(self.perception.speech)
        if name == "motion":
            return MotionStage(settings.segment_seconds)
        if name == "segments":
            motion = self.stage("motion").config() if "motion" in settings.perception else None
            return SegmentsStage(self.perception.embedder, settings.segment_seconds,
                                 self.stage("frames").config(), self.stage("speech").config(), motion)
        if name == "actions":
            from vidagent.memory.stages.actions import ActionsStage

            frames = self.stage("frames").config() if "pose" in settings.perception else None
            return ActionsStage(self.stage("objects").config(), self.stage("camera").config(), frames,
                                self.perception.video_classifier, settings.segment_seconds)
        if name == "camera":
            from vidagent.memory.stages.camera import CameraStage

            objects = self.stage("objects")
            return CameraStage(objects.frame_times, objects.sampling_config())  # type: ignore[union-attr]
        if name == "descriptions":
            from vidagent.memory.stages.descriptions import DescriptionsStage

            return DescriptionsStage(self.stage("actions").config(), self.perception.embedder,
                                     self.perception.captioner)
        from vidagent.memory.stages.objects import ObjectsStage

        reuse = self._reuse(follow_change=settings.detector_follows_change)
        return ObjectsStage(self.perception, settings, reuse=reuse)

    def _reuse(self, *, follow_change: bool = False) -> ChangeLimits | None:
        """Near-duplicate reuse (None when off); ``follow_change`` adds the sparse rate where nothing moves."""
        if not self.settings.reuse_near_duplicates:
            return None
        return ChangeLimits(sparse=SparseRate()) if follow_change else ChangeLimits()

    def missing_stages(self, video: Video, stages: Sequence[str] = TEMPORAL_STAGES) -> list[str]:
        """The stages (with their requirements) that are not built yet for ``video``."""
        video_id = video.content_hash
        return [name for name in self._with_requirements(stages)
                if not self.library.has_stage(video_id, name, self.stage(name).config())]

    def build(self, video: Video, stages: Sequence[str] = TEMPORAL_STAGES, *, progress: bool = True,
              on_frames: Callable[[int, int], None] | None = None) -> VideoMemory:
        """Build whichever of ``stages`` (and what they require) are missing, and return the memory.

        Frame stages run as one pipeline (``FramePipeline``); meanwhile the table stages that need
        no frame stage (speech) are computed on a thread of their own and written once the frame
        stages are (a build that fails in its frame stages writes none of them); the others after.
        ``on_frames(done, total)`` follows the frame stages frame by frame.
        """
        self.library.add_video(video.info)
        missing = self.missing_stages(video, stages)
        frame_stages = [self.stage(name) for name in missing if _is_frame_stage(self.stage(name))]
        frame_names = {stage.name for stage in frame_stages}
        table_names = [name for name in missing if name not in frame_names]
        early = [name for name in table_names
                 if frame_stages and not (set(self._with_requirements([name])) - {name}) & set(missing)]
        late = [name for name in table_names if name not in early]
        beside = _Background(lambda: self._compute_table_stages(video, early, progress)) if early else None
        if frame_stages:  # on failure the thread is not waited for, and what it computes is dropped
            self._build_frame_stages(video, frame_stages, progress, on_frames)  # type: ignore[arg-type]
        if beside is not None:
            self._write_table_stages(video, beside.join())
        for name in late:  # each may read what the one before wrote
            self._write_table_stages(video, self._compute_table_stages(video, [name], progress))
        return VideoMemory(video, self.library)

    def _compute_table_stages(self, video: Video, names: Sequence[str], progress: bool) -> list[_Computed]:
        computed = []
        for name in names:
            started = time.perf_counter()
            rows = self.stage(name).build(video, self.library, progress)  # type: ignore[union-attr]
            computed.append(_Computed(name, rows, time.perf_counter() - started))
        return computed

    def _write_table_stages(self, video: Video, computed: Sequence[_Computed]) -> None:
        for item in computed:
            self.library.write_stage(video.content_hash, item.name, self.stage(item.name).config(), item.rows,
                                     item.seconds)

    def _with_requirements(self, stages: Sequence[str]) -> list[str]:
        wanted: set[str] = set()

        def add(name: str) -> None:
            if name not in wanted:
                wanted.add(name)
                for required in self.stage(name).requires:
                    add(required)
                for follower in FOLLOWERS.get(name, ()):
                    add(follower)

        for name in stages:
            add(name)
        return [name for name in STAGE_ORDER if name in wanted]

    def _build_frame_stages(self, video: Video, stages: list[FrameStage], progress: bool,
                            on_frames: Callable[[int, int], None] | None = None) -> None:
        outcomes = FramePipeline(self.library, video, progress, on_frames).run(stages)
        self.last_reused = {name: outcome.reused for name, outcome in outcomes.items()}
        for stage in stages:
            outcome = outcomes[stage.name]
            if outcome.reused:
                log.info("%s: %s reused %d near-duplicate frame results", video.path.name, stage.name, outcome.reused)
            started = time.perf_counter()
            rows = stage.finish(video, self.library, outcome.results)
            elapsed = outcome.seconds + time.perf_counter() - started
            self.library.write_stage(video.content_hash, stage.name, stage.config(), rows, elapsed)


@dataclass(frozen=True)
class _Computed:
    """A table stage's rows, computed and not yet written."""

    name: str
    rows: Rows
    seconds: float


class _Background:
    """Runs a function on a thread; ``join`` waits for it and returns what it returned (or raises
    what it raised)."""

    def __init__(self, function: Callable[[], list[_Computed]]) -> None:
        self._function = function
        self._result: list[_Computed] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True, name="table-stages")
        self._thread.start()

    def _main(self) -> None:
        try:
            self._result = self._function()
        except BaseException as error:  # noqa: BLE001 - raised again by join()
            self._error = error

    def join(self) -> list[_Computed]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result


def _is_frame_stage(stage: Stage | FrameStage) -> bool:
    return hasattr(stage, "process")
