"""Caption-set imports as background jobs: memories without video files, built in the model lane.

The caption set is read and checked in full when the request comes (a bad one is refused then, naming
its file and record, with nothing written); the job then embeds and writes the memories one video at a
time (one transaction each), publishing each video done as a ``progress`` event, and ends with the
import report. A request for a caption set that an unfinished job is already importing joins that job.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from vidagent.errors import VidagentError
from vidagent.memory.caption_import import ImportReport, PreparedImport, write_import
from vidagent.memory.store import Library
from vidagent.perception.base import TextEmbedder
from vidagent.server.errors import NotFoundError, error_body
from vidagent.server.events import EventLog
from vidagent.server.lane import ModelLane

log = logging.getLogger(__name__)
JOB_PREFIX = "import-"
PROGRESS_EVENTS_PER_S = 4  # at most this many progress events a second (and always the last video's)
_KEPT_JOBS = 50


@dataclass
class ImportJob:
    id: str
    prepared: PreparedImport
    events: EventLog = field(default_factory=EventLog)
    state: str = "queued"  # queued, running, done, failed
    done: int = 0
    report: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    future: Future[None] | None = None

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")

    @property
    def memory_ids(self) -> frozenset[str]:
        return frozenset(self.prepared.ids.values())

    def to_dict(self) -> dict[str, Any]:
        prepared = self.prepared
        return {"job_id": self.id, "kind": "import", "state": self.state, "source": str(prepared.source),
                "format": prepared.format, "namespace": prepared.namespace, "captioner": prepared.captioner,
                "videos": len(prepared.videos), "captions": prepared.captions, "done": self.done,
                "report": self.report, "error": self.error}


def report_dict(report: ImportReport) -> dict[str, Any]:
    """An import report as the API gives it (the fields of ``vidagent import --json``)."""
    return {"source": str(report.source), "format": report.format, "namespace": report.namespace,
            "imported": list(report.imported), "unchanged": list(report.unchanged), "captions": report.captions,
            "seconds": round(report.seconds, 2)}


class ImportJobs:
    """Starts, joins and finds import jobs. ``library`` is written to; ``embedder`` gives the session's
    text embedder (called in the lane, where it is never used by two jobs at once)."""

    def __init__(self, lane: ModelLane, library: Library, embedder: Callable[[], TextEmbedder],
                 max_queued: int | None = None) -> None:
        self._lane = lane
        self._library = library
        self._embedder = embedder
        self._max_queued = max_queued
        self._jobs: dict[str, ImportJob] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def start(self, prepared: PreparedImport) -> ImportJob:
        with self._lock:
            for job in self._jobs.values():
                same = job.prepared.source == prepared.source and job.prepared.sha256 == prepared.sha256
                if same and not job.finished and job.memory_ids >= frozenset(prepared.ids.values()):
                    return job
            job = ImportJob(f"{JOB_PREFIX}{next(self._ids)}", prepared)
            self._jobs[job.id] = job
            self._forget_old()
        job.events.publish("queued", {**job.to_dict(), "ahead": self._lane.pending})
        try:
            job.future = self._lane.submit(lambda: self._run(job), limit=self._max_queued)
        except Exception:
            with self._lock:
                self._jobs.pop(job.id, None)
            raise
        return job

    def get(self, job_id: str) -> ImportJob:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"no import job {job_id!r}")
        return job

    def busy(self, video_id: str) -> bool:
        """Whether an unfinished import writes the memory ``video_id``."""
        with self._lock:
            return any(not job.finished and video_id in job.memory_ids for job in self._jobs.values())

    def _run(self, job: ImportJob) -> None:
        job.state = "running"
        job.events.publish("started", job.to_dict())
        last = [0.0]

        def on_video(done: int, total: int, video_id: str, written: bool) -> None:
            job.done = done
            now = time.perf_counter()
            if done < total and now - last[0] < 1 / PROGRESS_EVENTS_PER_S:
                return
            last[0] = now
            job.events.publish("progress", {"done": done, "total": total, "video_id": video_id,
                                            "state": "imported" if written else "unchanged"})

        try:
            report = write_import(self._library, self._embedder(), job.prepared, on_video=on_video)
            job.report = report_dict(report)
            job.state = "done"
            job.events.publish("done", job.to_dict())
        except Exception as error:  # noqa: BLE001 - a failed import ends its job, never the server
            log.warning("import job %s of %s failed: %s", job.id, job.prepared.source, error,
                        exc_info=not isinstance(error, VidagentError))
            job.state = "failed"
            job.error = error_body(error)
            job.events.publish("error", job.to_dict())

    def _forget_old(self) -> None:
        finished = [job_id for job_id, job in self._jobs.items() if job.finished]
        for job_id in finished[: max(0, len(self._jobs) - _KEPT_JOBS)]:
            del self._jobs[job_id]
