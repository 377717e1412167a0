"""``VideoService``: everything a face (the HTTP API, the MCP server) can do with videos, in one place.

It holds the session (models loaded once), the folders videos may come from, the model lane that
index builds and questions queue in, and the library's catalog. Methods are synchronous and
thread-safe; the faces call the slow ones from worker threads.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from vidagent.agent.answer import Answer
from vidagent.errors import MemoryStoreError, ModelUnavailableError, VideoError
from vidagent.knowledge.spec import KnowledgeSpec
from vidagent.llm.base import ChatModel
from vidagent.memory.builder import ALL_STAGES, TEMPORAL_STAGES
from vidagent.memory.caption_import import ImportOptions, prepare_import
from vidagent.memory.library_search import LibrarySearch
from vidagent.memory.search_index import SearchFilters
from vidagent.memory.sql import QueryResult, ReadOnlyQueries
from vidagent.memory.store import Library
from vidagent.memory.stored_video import StoredVideo, is_memory_id
from vidagent.server.asks import AskRun, AskRunner, AskSpec
from vidagent.server.catalog import Catalog, VideoEntry
from vidagent.server.config import ServeConfig
from vidagent.server.edits import ServerEdits
from vidagent.server.errors import NoVideoFileError, NotFoundError, PathRefusedError, RequestError, UploadError
from vidagent.server.imports import JOB_PREFIX, ImportJob, ImportJobs
from vidagent.server.jobs import IndexJob, IndexJobs
from vidagent.server.lane import ModelLane
from vidagent.server.media import MediaCutter
from vidagent.server.paths import AllowedFolders
from vidagent.server.proxies import PlayableCopies, Playback
from vidagent.server.uploads import UPLOAD_SUFFIXES, UploadFolder
from vidagent.session import Session
from vidagent.tools.media import video_file
from vidagent.video.video import Video

log = logging.getLogger(__name__)
MAX_SQL_ROWS = 1000


class VideoService:
    def __init__(self, config: ServeConfig, session: Session | None = None) -> None:
        self.config = config
        self.session = session or Session(config.settings)
        self.folders = AllowedFolders(config.video_dirs)
        config.uploads.mkdir(parents=True, exist_ok=True)
        self.uploads = UploadFolder(config.uploads, config.max_upload_bytes)
        upload_folder = AllowedFolders([config.uploads])
        self._library = Library(config.settings.library_path)
        self.catalog = Catalog(self._library, lambda path: self.folders.contains(path) or upload_folder.contains(path))
        self.lane = ModelLane()
        self._search: LibrarySearch | None = None  # opened on the first search, kept (its index follows the library)
        self._search_lock = threading.Lock()
        self.media = MediaCutter(config.clips_dir, config.max_clip_seconds)
        self.proxies = PlayableCopies(config.proxies_dir)
        self.edits = ServerEdits(config.settings.artifacts_dir, self.lane, self.handle, self.session.builder,
                                 config.max_queued, max_seconds=config.max_edit_seconds, max_running=config.max_edits,
                                 chat=self.chat_model)
        self.jobs = IndexJobs(self.lane, self.session.builder)
        self.asks = AskRunner(self.lane, self.session.ask, config.max_queued, after=self._complete_glanced,
                              embedded=self.session.embedded_llm, cap=config.question_cap)
        self.imports = ImportJobs(self.lane, self._library, lambda: self.session.perception.embedder, config.max_queued)
        self._handles: dict[str, tuple[tuple[int, int], Video]] = {}
        self._handles_lock = threading.Lock()

    # -- videos --------------------------------------------------------------------------------
    def videos(self) -> list[VideoEntry]:
        return self.catalog.videos()

    def video(self, video_id: str) -> VideoEntry:
        return self.catalog.video(video_id)

    def folder_files(self) -> list[dict[str, object]]:
        """The video files in the allowed folders, each saying whether it is registered (by path)."""
        registered = {entry.path for entry in self.catalog.videos()}
        return [{"path": str(path), "name": path.name, "folder": str(path.parent),
                 "bytes": path.stat().st_size, "registered": str(path) in registered}
                for path in self.folders.files(UPLOAD_SUFFIXES)]

    def register_path(self, given: str) -> VideoEntry:
        """Register the video at ``given`` (inside the allowed folders): probed, hashed, added to the library."""
        path = self.folders.resolve(given)
        return self._register(Video(path))

    def find(self, reference: str) -> VideoEntry:
        """A video by its id (a memory imported from captions by its ``namespace:name`` id), or by a path
        inside the allowed folders (registered on the way)."""
        if is_memory_id(reference) or not any(sep in reference for sep in ("/", "\\", ".")):
            return self.catalog.video(reference)
        return self.register_path(reference)

    def register_upload(self, temporary: Path, content_hash: str, name: str) -> VideoEntry:
        """Keep an upload received by ``UploadFolder.receive`` under ``name`` if it is a video (415 and deleted
        if not). Content the server already lists (from a folder, or uploaded before) is that video: the
        upload is dropped, and the listed video keeps its name and place."""
        known = self._library.video_row(content_hash)
        if known is not None and os.path.isfile(known["path"]):
            try:
                entry = self.catalog.video(content_hash)
            except NotFoundError:  # registered by the CLI outside the folders: this upload makes it visible
                entry = None
            if entry is not None:
                temporary.unlink(missing_ok=True)
                return entry
        try:
            probed = Video(temporary)
        except VideoError as error:
            temporary.unlink(missing_ok=True)
            reason = str(error).split(": ", 1)[-1]
            raise UploadError(f"the upload is not a video vidagent can read ({reason})", status=415) from None
        kept = self.uploads.keep(temporary, content_hash, name)
        probed.path, probed.info = kept, replace(probed.info, path=str(kept))
        return self._register(probed)

    def _register(self, video: Video) -> VideoEntry:
        self._library.add_video(video.info)
        self.catalog.forget_path(video.info.path)
        self._remember(video)
        return self.catalog.video(video.content_hash)

    def delete(self, video_id: str) -> dict[str, object]:
        """Remove a visible video: its memory (every table's rows, and what was learned about it), and its
        file when it was uploaded; a file in a --videos folder is the user's and stays (listed again as
        not added). Refused (409) while the video is being indexed or asked about."""
        entry = self.catalog.video(video_id)
        if self.jobs.busy(video_id) or self.asks.busy(video_id) or self.imports.busy(video_id):
            raise RequestError(f"{entry.name} is being indexed, imported or asked about; remove it when that is done",
                               status=409)
        self.catalog.remove(video_id)
        with self._handles_lock:
            self._handles.pop(video_id, None)
        removed = entry.has_file and self.uploads.remove(Path(entry.path))
        if entry.has_file:
            self.proxies.forget(video_id)
        self.catalog.forget_path(entry.path)
        log.info("removed %s (%s)%s", entry.name, video_id, " and its uploaded file" if removed else "")
        return {"video_id": video_id, "name": entry.name, "removed": True, "file_removed": removed}

    def handle(self, video_id: str) -> Video:
        """An open handle on a visible video (reopened when its file changed since); a memory imported from
        captions has no file to open (``NoVideoFileError``, 409)."""
        entry = self.catalog.video(video_id)
        if entry.imported is not None:
            raise NoVideoFileError(f"no video file: {video_id} is a memory imported from captions "
                                   f"({entry.imported.describe()}); it has no frames, clips or file to play, "
                                   f"and nothing to build: read its captions (GET /api/videos/{video_id}/memory) "
                                   "or ask about it")
        try:
            stat = os.stat(entry.path)
        except OSError:
            raise VideoError(f"{entry.path}: the file is gone") from None
        stamp = (stat.st_size, stat.st_mtime_ns)
        with self._handles_lock:
            cached = self._handles.get(video_id)
        if cached is not None and cached[0] == stamp and str(cached[1].path) == entry.path:
            return cached[1]
        video = Video(entry.path)
        if video.content_hash != video_id:
            raise VideoError(f"{entry.path}: the file changed since it was registered; register it again")
        self._remember(video)
        return video

    def _remember(self, video: Video) -> None:
        stat = os.stat(video.path)
        with self._handles_lock:
            self._handles[video.content_hash] = ((stat.st_size, stat.st_mtime_ns), video)

    def chat_model(self) -> ChatModel | None:
        """The session's chat model, or None when none is installed or configured (a tool that reads with it
        only where it must, such as refer_object, then goes without)."""
        try:
            return self.session.llm
        except ModelUnavailableError as error:
            log.info("no chat model: %s", error)
            return None

    # -- memory --------------------------------------------------------------------------------
    def index(self, video_id: str, stages: Sequence[str] | None = None) -> IndexJob:
        """Start (or join) a background build of the video's memory; all stages by default."""
        wanted = tuple(stages) if stages else ALL_STAGES
        unknown = [s for s in wanted if s not in ALL_STAGES]
        if unknown:
            raise RequestError(f"unknown stage {unknown[0]!r}; stages are {', '.join(ALL_STAGES)}")
        return self.jobs.start(self.handle(video_id), wanted)

    def memory(self, video_id: str) -> dict[str, object]:
        return self.catalog.memory(video_id)

    def search(self, query: str, *, kinds: Sequence[str] = (), video_id: str | None = None,
               limit: int = 12) -> dict[str, object]:
        """Moments across the visible videos for ``query`` (the library search; a video the server does not show,
        such as one indexed outside its folders, is never searched): each with the video's name, its spans, the
        lines that matched and a thumbnail address for a video with a file."""
        visible = {entry.video_id: entry for entry in self.catalog.videos()}
        if video_id is not None and video_id not in visible:
            self.catalog.video(video_id)  # the catalog's own 404
        wanted = (video_id,) if video_id else tuple(visible)
        if not wanted:
            return {"query": query, "moments": []}
        try:
            filters = SearchFilters(videos=wanted, kinds=tuple(kinds))
            with self._search_lock:
                if self._search is None:
                    self._search = LibrarySearch.open(self.config.settings, self._library, self.session.perception.embedder)
                found = self._search.search(query, filters, limit=limit)
        except ValueError as error:
            raise RequestError(str(error)) from error
        moments = []
        for moment in found:
            entry = visible[moment.video_id]
            middle = round((moment.start_s + moment.end_s) / 2, 2)
            moments.append({
                "video_id": moment.video_id, "name": entry.name, "start_s": round(moment.start_s, 2),
                "end_s": round(moment.end_s, 2), "spans": [[round(a, 2), round(b, 2)] for a, b in moment.spans],
                "kinds": list(moment.kinds), "matched_by": list(moment.matched_by),
                "lines": [{"kind": line.kind, "start_s": round(line.start_s, 2), "end_s": round(line.end_s, 2),
                           "text": line.text} for line in moment.lines],
                "thumbnail": f"/api/videos/{moment.video_id}/frame?t={middle}&width=240" if entry.has_file else None})
        return {"query": query, "moments": moments}

    def sql(self, video_id: str, query: str, max_rows: int = 200, timeout_s: float = 5.0) -> QueryResult:
        """Run one read-only statement over the video's memory."""
        entry = self.catalog.video(video_id)
        if not entry.stages:
            raise RequestError(f"{entry.name} has no memory yet: index it first", status=409)
        if not 1 <= max_rows <= MAX_SQL_ROWS:
            raise RequestError(f"max_rows must be between 1 and {MAX_SQL_ROWS}")
        with ReadOnlyQueries(self.config.settings.library_path, video_id, max_rows=max_rows,
                             timeout_s=min(timeout_s, 30.0)) as queries:
            try:
                return queries.run(query)
            except MemoryStoreError as error:  # the statement's own fault: a syntax error, a timeout
                raise RequestError(str(error)) from None

    # -- questions -----------------------------------------------------------------------------
    def start_ask(self, spec: AskSpec) -> AskRun:
        """Queue a question; its steps and answer arrive on ``run.events``. A video is named by its id or a
        path; a memory imported from captions by its id, and answered from its captions."""
        handles = [self._source(self.find(reference)) for reference in spec.videos]
        return self.asks.start(replace(spec, knowledge=tuple(self._knowledge(item) for item in spec.knowledge)),
                               handles)

    def _complete_glanced(self, answer: Answer, sources: Sequence[Video | StoredVideo]) -> dict[str, str]:
        """The rest of each memory an answer was read from in part, built by an index job (queued in the lane
        behind the question): its job id by video id."""
        partial = answer.artifacts.get("coverage", {})
        files = [file for file in map(video_file, sources) if file is not None]
        return {file.content_hash: self.jobs.start(file, TEMPORAL_STAGES).id
                for file in files if file.content_hash in partial}

    def _knowledge(self, given: str | KnowledgeSpec) -> KnowledgeSpec:
        """A knowledge source a client named: ``web``, or a file inside the server's folders (its real path;
        a name holding ``#`` is that file when the folders have it, else ``PATH#description``). A URL is
        refused: fetching what clients name would let them reach whatever this server can."""
        text = given.location if isinstance(given, KnowledgeSpec) else given.strip()
        if text.lower() == "web" or text.lower().startswith("web#"):
            return KnowledgeSpec.parse(text)
        if re.match(r"(?i)https?://", text):
            raise RequestError("this server fetches no URLs for clients: put the file in a --videos folder and "
                               "name its path")
        location, description = text, ""
        if "#" in text:
            try:
                return KnowledgeSpec(str(self.folders.resolve(text, what="knowledge file")))
            except PathRefusedError:
                location, _, description = text.partition("#")
        path = self.folders.resolve(location.strip(), what="knowledge file")
        return KnowledgeSpec(str(path), " ".join(description.split()))

    def _source(self, entry: VideoEntry) -> Video | StoredVideo:
        if entry.imported is None:
            return self.handle(entry.video_id)
        stored = self._library.stored_video(entry.video_id)
        if stored is None:  # removed between the listing and now
            raise NotFoundError(f"no video with id {entry.video_id!r}: list them with GET /api/videos")
        return stored

    # -- memories without video files: released captions ---------------------------------------
    def import_captions(self, given: str, *, format: str | None = None, namespace: str | None = None,
                        captioner: str | None = None, only: Sequence[str] | None = None) -> ImportJob:
        """Start (or join) importing the caption set at ``given`` (a file, folder or zip inside the allowed
        folders) as memories without video files. The whole set is read and checked first: a bad one is a
        ``CaptionFormatError`` (422) naming its file and record, and nothing is queued or written."""
        path = self.folders.resolve(given, what="caption file", folder_ok=True)
        options = ImportOptions(format=format, namespace=namespace, captioner=captioner,
                                only=frozenset(only) if only is not None else None)
        try:
            prepared = prepare_import(path, options)
        except MemoryStoreError as error:  # a namespace or video id that makes no valid memory id
            raise RequestError(str(error), status=422) from None
        return self.imports.start(prepared)

    def job(self, job_id: str) -> IndexJob | ImportJob:
        """An index job (``job-N``) or an import job (``import-N``)."""
        return self.imports.get(job_id) if job_id.startswith(JOB_PREFIX) else self.jobs.get(job_id)

    # -- evidence ------------------------------------------------------------------------------
    def thumbnail(self, video_id: str, time_s: float, max_side: int = 320) -> bytes:
        return self.media.thumbnail(self.handle(video_id), time_s, max_side)

    def clip(self, video_id: str, start_s: float, end_s: float) -> Path:
        return self.media.clip(self.handle(video_id), start_s, end_s)

    def playback(self, video_id: str, *, force_copy: bool = False) -> Playback:
        """How the video plays in a browser: its own file, or a playable copy (made in the background when it
        is not made yet; ``force_copy``: even of a file that should play as it is)."""
        return self.proxies.playback(self.handle(video_id), force_copy=force_copy)

    def close(self) -> None:
        """Stop the questions under way (at their next step), wait for the lane and the edits, free the models."""
        self.asks.cancel_all()
        self.proxies.close()
        self.lane.close()
        self.edits.close()
        self.session.close()
        if self._search is not None:
            self._search.close()
        self._library.close()
