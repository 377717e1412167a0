"""Indexing many videos into one library: in this process, on local worker processes, or on Ray.

``plan_index`` finds the videos (files given, and video files under folders given), opens each
(an unreadable file given by name stops everything before any work; one found in a folder is
reported and left out), drops repeated content, and leaves out videos whose stages are built.
``index_videos`` builds the rest, one video per worker at a time, and yields an ``IndexOutcome``
per video as it finishes.

Every worker writes into the one library database: SQLite in WAL mode takes one writer at a
time, and a worker's writes are short (a batch's checkpoint, a stage's rows in one
transaction), so workers wait on each other for milliseconds. A killed run resumes: finished
videos are skipped, an unfinished one continues from its checkpoints.

On Ray no node needs to see the library: a Ray worker builds each video into a library of its
own (a temporary file, seeded with a pack of the stages the user's library already has for it)
and returns the video's memory as a pack (``vidagent.memory.packs``); the driver imports each pack
into the user's library as it arrives. The nodes still need to read the videos at the paths given.
A killed Ray run keeps every video whose pack was imported; one being built starts again.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Sequence

from vidagent.config import Settings
from vidagent.errors import VidagentError, VideoError
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.packs import export_pack_bytes, import_pack_bytes
from vidagent.memory.store import Library
from vidagent.perception.suite import Perception
from vidagent.perception.vision_chat import usage_since
from vidagent.video.video import VIDEO_SUFFIXES, Video

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class IndexItem:
    """One video to build."""

    path: str
    video_id: str
    duration_s: float
    seed: bytes | None = None  # for a worker that builds into its own library: a pack of what is built


@dataclass(frozen=True)
class IndexOutcome:
    """What became of one video: ``built``, ``skipped`` (already indexed or a repeat) or ``failed``."""

    path: str
    status: str
    duration_s: float = 0.0
    seconds: float = 0.0
    message: str = ""
    pack: bytes | None = None  # the memory a worker built into its own library, until the driver imports it
    pack_id: str = ""  # the id of the pack the memory came in (Ray)
    # what the metered models (a vision chat captioner) cost for this video: role -> counts (VisionUsage.snapshot)
    usage: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexPlan:
    jobs: list[IndexItem]
    skipped: list[IndexOutcome]  # already indexed, repeated content, or unreadable files found in folders


def find_videos(paths: Sequence[str | Path]) -> list[tuple[Path, bool]]:
    """``(path, named)`` for each file given and each video file under each folder given (sorted);
    ``named`` tells a file given by name from one found in a folder."""
    found: list[tuple[Path, bool]] = []
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            found += [(p, False) for p in sorted(path.rglob("*"))
                      if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES and not p.name.startswith(".")]
        elif path.exists():
            found.append((path, True))
        else:
            raise VideoError(f"{path}: no such file or folder")
    return found


def plan_index(paths: Sequence[str | Path], settings: Settings, stages: Sequence[str]) -> IndexPlan:
    """What ``index_videos`` has to build for ``paths`` (see the module's description). Every
    video is opened before any model or the library is."""
    skipped: list[IndexOutcome] = []
    videos: dict[str, Video] = {}
    for path, named in find_videos(paths):
        try:
            video = Video(path)
        except VideoError as error:
            if named:
                raise
            skipped.append(IndexOutcome(str(path), "failed", message=str(error)))
            continue
        if video.content_hash in videos:
            skipped.append(IndexOutcome(str(path), "skipped", video.duration_s,
                                        message=f"same content as {videos[video.content_hash].path}"))
        else:
            videos[video.content_hash] = video
    jobs: list[IndexItem] = []
    if not videos:
        return IndexPlan(jobs, skipped)
    perception = Perception.from_settings(settings)  # models load on first use: none loads here
    try:
        with Library(settings.library_path) as library:
            builder = MemoryBuilder(library, perception, settings)
            for video in videos.values():
                if builder.missing_stages(video, stages):
                    jobs.append(IndexItem(str(video.path), video.content_hash, video.duration_s))
                else:
                    skipped.append(IndexOutcome(str(video.path), "skipped", video.duration_s,
                                                message="already indexed"))
    finally:
        perception.close()
    return IndexPlan(jobs, skipped)


@dataclass(frozen=True)
class IndexerConfig:
    """What a worker needs (picklable: sent to processes and Ray actors)."""

    settings: Settings
    stages: tuple[str, ...]
    progress: bool = False  # per-video progress bars (only when indexing in this process)
    packs: bool = False  # build into a library of the worker's own and return packs (Ray)


class VideoIndexer:
    """A worker: holds the models and the library, and builds one video per call. With
    ``config.packs`` it never opens the settings' library: each video is built into a temporary
    library of its own and comes back as a pack in the outcome."""

    def __init__(self, config: IndexerConfig) -> None:
        self.config = config
        self.perception = Perception.from_settings(config.settings)
        self.library = None if config.packs else Library(config.settings.library_path)
        self.builder = None if self.library is None else MemoryBuilder(self.library, self.perception, config.settings)

    def __call__(self, job: IndexItem) -> IndexOutcome:
        started = time.perf_counter()
        before = self.perception.usage()
        pack = None
        try:
            video = Video(job.path)
            if video.content_hash != job.video_id:
                raise VideoError(f"{job.path}: the file changed since the run began")
            if self.builder is not None:
                self.builder.build(video, self.config.stages, progress=self.config.progress)
            else:
                pack = self._build_pack(video, job)
        except VidagentError as error:
            return IndexOutcome(job.path, "failed", job.duration_s, time.perf_counter() - started, str(error),
                                usage=self._usage_since(before))
        return IndexOutcome(job.path, "built", job.duration_s, time.perf_counter() - started, pack=pack,
                            usage=self._usage_since(before))

    def _usage_since(self, before: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return {role: usage_since(before.get(role, {}), counts) for role, counts in self.perception.usage().items()}

    def _build_pack(self, video: Video, job: IndexItem) -> bytes:
        with tempfile.TemporaryDirectory(prefix="vidagent-index-") as folder:
            with Library(Path(folder) / "library.sqlite") as library:
                if job.seed is not None:
                    import_pack_bytes(library, job.seed, f"the pack of what is built for {job.path}")
                MemoryBuilder(library, self.perception, self.config.settings).build(
                    video, self.config.stages, progress=self.config.progress)
                return export_pack_bytes(library, job.video_id)[0]

    def close(self) -> None:
        self.perception.close()
        if self.library is not None:
            self.library.close()


class Indexers:
    """A picklable factory of ``VideoIndexer`` workers."""

    def __init__(self, config: IndexerConfig) -> None:
        self.config = config

    def __call__(self) -> VideoIndexer:
        return VideoIndexer(self.config)


def worker_settings(settings: Settings, workers: int) -> Settings:
    """Settings for one of ``workers`` workers on this machine: the cores are shared among them
    (each gets its share of detector processes unless the settings name a number)."""
    if settings.detector_workers:
        return settings
    return replace(settings, detector_workers=max(1, (os.cpu_count() or 1) // max(workers, 1)))


def index_videos(jobs: Sequence[IndexItem], settings: Settings, stages: Sequence[str], *, workers: int | None = None,
                 ray: bool = False, ray_address: str | None = None, progress: bool = False) -> Iterator[IndexOutcome]:
    """Build ``jobs`` (see ``plan_index``) and yield each video's outcome when it is done: in this
    process (``workers`` None or 1, no Ray), on ``workers`` spawned local processes, or on Ray
    actors of one CPU each (``workers`` of them, or one per CPU of the cluster)."""
    if not jobs:
        return
    from vidagent.parallel import on_processes, on_ray

    groups = [[job] for job in jobs]
    if ray:  # an actor holds one CPU: one detector process unless the settings say otherwise
        config = IndexerConfig(replace(settings, detector_workers=settings.detector_workers or 1), tuple(stages),
                               packs=True)
        with Library(settings.library_path) as library:
            groups = [[_seeded(library, job)] for job in jobs]
            for outcome in on_ray(Indexers(config), groups, workers=workers, address=ray_address):
                yield _receive(library, outcome)
    elif workers and workers > 1:
        config = IndexerConfig(worker_settings(settings, workers), tuple(stages))
        yield from on_processes(Indexers(config), groups, workers)
    else:
        indexer = VideoIndexer(IndexerConfig(settings, tuple(stages), progress=progress))
        try:
            for job in jobs:
                yield indexer(job)
        finally:
            indexer.close()


def _seeded(library: Library, job: IndexItem) -> IndexItem:
    """``job`` with a pack of the stages ``library`` already has for its video (none: as it is)."""
    if not library.stage_names(job.video_id):
        return job
    return replace(job, seed=export_pack_bytes(library, job.video_id)[0])


def _receive(library: Library, outcome: IndexOutcome) -> IndexOutcome:
    """Import the pack a worker returned into ``library``; the outcome without the pack's bytes."""
    if outcome.pack is None:
        return outcome
    try:
        result = import_pack_bytes(library, outcome.pack, f"the pack built for {outcome.path}")
    except VidagentError as error:
        return replace(outcome, status="failed", message=str(error), pack=None)
    return replace(outcome, pack=None, pack_id=result.pack_id)
