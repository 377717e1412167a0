"""Index builds as background jobs: one per video at a time, progress published stage by stage.

A request for a video whose build is queued or running (for the same stages or fewer) joins that job
instead of starting another; every build runs in the model lane, so no two builds ever overlap.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from vidagent.errors import VidagentError
from vidagent.memory.builder import MemoryBuilder
from vidagent.server.errors import NotFoundError, error_body
from vidagent.server.events import EventLog
from vidagent.server.lane import ModelLane
from vidagent.video.video import Video

log = logging.getLogger(__name__)
_KEPT_JOBS = 200  # finished jobs remembered for late readers


@dataclass
class IndexJob:
    id: str
    video_id: str
    stages: tuple[str, ...]
    events: EventLog = field(default_factory=EventLog)
    state: str = "queued"  # queued, running, done, failed
    built: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    started_at: float = field(default_factory=time.time)
    future: Future[None] | None = None

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.id, "video_id": self.video_id, "stages": list(self.stages), "state": self.state,
                "built": list(self.built), "error": self.error}


class IndexJobs:
    """Starts, joins and finds index jobs. ``builder`` gives the session's memory builder (called in the
    lane)."""

    def __init__(self, lane: ModelLane, builder: Callable[[], MemoryBuilder]) -> None:
        self._lane = lane
        self._builder = builder
        self._jobs: dict[str, IndexJob] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def start(self, video: Video, stages: Sequence[str]) -> IndexJob:
        wanted = tuple(stages)
        with self._lock:
            for job in self._jobs.values():
                if job.video_id == video.content_hash and not job.finished and set(wanted) <= set(job.stages):
                    return job
            job = IndexJob(f"job-{next(self._ids)}", video.content_hash, wanted)
            self._jobs[job.id] = job
            self._forget_old()
        job.events.publish("queued", {**job.to_dict(), "ahead": self._lane.pending})
        job.future = self._lane.submit(lambda: self._run(job, video))
        return job

    def busy(self, video_id: str) -> bool:
        """Whether a build of the video is queued or running."""
        with self._lock:
            return any(job.video_id == video_id and not job.finished for job in self._jobs.values())

    def get(self, job_id: str) -> IndexJob:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"no index job {job_id!r}")
        return job

    def _run(self, job: IndexJob, video: Video) -> None:
        job.state = "running"
        started = time.perf_counter()
        try:
            builder = self._builder()
            missing = builder.missing_stages(video, job.stages)
            job.events.publish("started", {**job.to_dict(), "missing": missing})
            for number, stage in enumerate(missing, 1):
                progress = {"stage": stage, "number": number, "total": len(missing)}
                job.events.publish("progress", {**progress, "state": "running",
                                                "elapsed_s": round(time.perf_counter() - started, 2)})
                stage_started = time.perf_counter()
                builder.build(video, [stage], progress=False, on_frames=_frames_reporter(job, progress))
                job.built.append(stage)
                job.events.publish("progress", {**progress, "state": "done",
                                                "seconds": round(time.perf_counter() - stage_started, 2),
                                                "elapsed_s": round(time.perf_counter() - started, 2)})
            builder.build(video, job.stages, progress=False)  # registers the video even when nothing was missing
            job.state = "done"
            job.events.publish("done", {**job.to_dict(), "seconds": round(time.perf_counter() - started, 2)})
        except Exception as error:  # noqa: BLE001 - a failed build ends its job, never the server
            log.warning("index job %s for %s failed: %s", job.id, video.path, error,
                        exc_info=not isinstance(error, VidagentError))
            job.state = "failed"
            job.error = error_body(error)
            job.events.publish("error", {**job.to_dict()})

    def _forget_old(self) -> None:
        finished = [job_id for job_id, job in self._jobs.items() if job.finished]
        for job_id in finished[: max(0, len(self._jobs) - _KEPT_JOBS)]:
            del self._jobs[job_id]


FRAME_EVENTS_PER_S = 4  # a frame stage's progress is published at most this often (and at its last frame)


def _frames_reporter(job: IndexJob, progress: dict[str, Any]) -> Callable[[int, int], None]:
    """Publishes a running stage's frames as ``progress`` events with ``frames_done`` and ``frames_total``,
    so a client's bar moves by frames (a stage may take most of a build)."""
    last = [0.0]

    def report(done: int, total: int) -> None:
        now = time.perf_counter()
        if done < total and now - last[0] < 1 / FRAME_EVENTS_PER_S:
            return
        last[0] = now
        job.events.publish("progress", {**progress, "state": "running", "frames_done": done, "frames_total": total})

    return report
