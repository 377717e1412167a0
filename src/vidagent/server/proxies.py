"""Playable copies: every video the page lists plays in its player, whatever its file's format.

A video whose file a browser plays as it is (``vidagent.video.proxy.playability``) is served as it is. One
it does not play (MPEG-4 Part 2, an AVI, AC-3 sound, ...) is re-encoded once into a copy a browser plays
(``make_proxy``: H.264 in MP4, else VP9 or VP8 in WebM, whatever the installed FFmpeg encodes), kept in
``folder`` under the video's content hash, so it is made once for every server, restart and client, and
served in its place. A copy is also made on request for a file that should play and does not (the page
asks for one when its player fails: a stream the browser's decoder refuses).

Copies are made in a thread of their own, one at a time (x264 already spreads one encode over the cores),
never in the model lane, where questions would wait behind an encode, and never on the server's event loop;
a request for a copy under way joins it, and its progress is read from ``Playback``. A source that cannot be
decoded, or that asks for more work than a copy may take (``check_copyable``: a huge picture or duration,
too many streams; or stopped while copying past its time, frame or size cap), fails its copy for good, with a
message that says so (422), kept beside the copies (``<content hash>.refused.json``) so that no later request,
server or restart tries it again; a header that is refused is never queued, so it holds up no other copy. A
copy that cannot be written fails until it is asked for again; a server whose FFmpeg encodes nothing a browser
plays says so (501).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vidagent.errors import OutputError, VideoError
from vidagent.server.errors import error_body
from vidagent.video.proxy import (PROXY_FORMATS, Playability, ProxyFormat, check_copyable, make_proxy, playability,
                                  proxy_format)
from vidagent.video.video import Video

log = logging.getLogger(__name__)
NO_ENCODER_STATUS = 501  # the server cannot make what is asked: no encoder of a format browsers play
RETRY_AFTER_S = 30.0  # a copy that could not be written is tried again when asked for this long after
REFUSED_SUFFIX = ".refused.json"  # beside the copies: why a video's copy was refused for good


class _Cancelled(Exception):
    """The server is closing: the copy under way stops at its next frame."""


@dataclass
class ProxyJob:
    """A copy being made (or made, or failed): ``progress`` is the share of the video encoded so far."""

    video_id: str
    name: str
    state: str = "queued"  # queued, running, done, failed
    progress: float = 0.0
    error: dict[str, Any] | None = None
    retry: bool = False  # a failure that asking again may mend (the copy could not be written)
    path: Path | None = None
    failed_at: float | None = None


@dataclass(frozen=True)
class Playback:
    """How a video plays: its own file, or a copy (``state`` ready, queued, running or failed), and why."""

    video_id: str
    source: str  # original, proxy
    state: str
    reason: str  # what the file is, and (for a copy) what in it browsers do not play
    progress: float = 1.0
    path: Path | None = None
    media_type: str | None = None
    message: str = ""
    status: int = 200  # a failed copy's HTTP status
    forced: bool = False  # a copy of a file that should have played as it is

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def to_dict(self) -> dict[str, Any]:
        query = "?proxy=true" if self.source == "proxy" and self.forced else ""
        return {"video_id": self.video_id, "source": self.source, "state": self.state, "reason": self.reason,
                "progress": round(self.progress, 3), "message": self.message,
                "status": self.status if self.state == "failed" else 200,
                "url": f"/api/videos/{self.video_id}/file{query}" if self.ready else None}


class PlayableCopies:
    """The playable copies kept in ``folder``, and the thread that makes them."""

    def __init__(self, folder: Path, formats: tuple[ProxyFormat, ...] = PROXY_FORMATS) -> None:
        self.folder = folder
        self.format = proxy_format(formats)
        self._suffixes = tuple(dict.fromkeys(form.suffix for form in formats))
        self._media_types = {form.suffix: form.media_type for form in formats}
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vidagent-proxies")
        self._jobs: dict[str, ProxyJob] = {}
        self._checks: dict[str, Playability] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        if self.format is None:
            log.warning("this FFmpeg encodes none of %s: videos browsers do not play cannot be copied for the page",
                        ", ".join(form.name for form in formats))

    def playback(self, video: Video, *, force_copy: bool = False) -> Playback:
        """How ``video`` plays: as it is when a browser plays it (unless ``force_copy``), else from its copy,
        whose making is started (or joined) when it is not made yet."""
        check = self.playability(video)
        if check.playable and not force_copy:
            return Playback(video.content_hash, "original", "ready", check.reason, path=video.path)
        made = self.cached(video.content_hash)
        if made is not None:
            return Playback(video.content_hash, "proxy", "ready", check.reason, path=made,
                            media_type=self._media_types[made.suffix], forced=check.playable)
        if self.format is None:
            return Playback(video.content_hash, "proxy", "failed", check.reason, 0.0, status=NO_ENCODER_STATUS,
                            message=f"{video.path.name} cannot be played here ({check.reason}), and this server's "
                                    "FFmpeg has no encoder of a format browsers play (H.264, VP9 or VP8) to copy it "
                                    "with; download it, or convert it to H.264 in MP4", forced=check.playable)
        refused = self._refusal(video)
        if refused is not None:
            return Playback(video.content_hash, "proxy", "failed", check.reason, 0.0, message=refused, status=422,
                            forced=check.playable)
        job = self._start(video)
        if job.state == "done" and job.path is not None:  # made between the look in the folder and now
            return Playback(video.content_hash, "proxy", "ready", check.reason, path=job.path,
                            media_type=self._media_types[job.path.suffix], forced=check.playable)
        if job.state == "failed":
            error = job.error or {}
            return Playback(video.content_hash, "proxy", "failed", check.reason, job.progress,
                            message=str(error.get("message", "")), status=int(error.get("status", 500)),
                            forced=check.playable)
        return Playback(video.content_hash, "proxy", job.state, check.reason, job.progress, forced=check.playable)

    def playability(self, video: Video) -> Playability:
        """Whether a browser plays ``video``'s file as it is (read once per content)."""
        with self._lock:
            known = self._checks.get(video.content_hash)
        if known is None:
            known = playability(video.path)
            with self._lock:
                self._checks[video.content_hash] = known
        return known

    def cached(self, video_id: str) -> Path | None:
        """The copy made of the video with this content hash, if there is one (in any format browsers play)."""
        for suffix in self._suffixes:
            path = self.folder / f"{video_id}{suffix}"
            if path.is_file():
                return path
        return None

    def _refusal(self, video: Video) -> str | None:
        """Why ``video``'s copy is refused for good (read from the folder, or found now in its header), or None."""
        marker = self.folder / f"{video.content_hash}{REFUSED_SUFFIX}"
        try:
            return str(json.loads(marker.read_text(encoding="utf-8"))["message"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        try:
            check_copyable(video)
        except VideoError as error:
            message = self._refuse(video, error)
            with self._lock:
                self._jobs.pop(video.content_hash, None)
            return message
        return None

    def _refuse(self, video: Video, error: VideoError) -> str:
        """Keep why ``video``'s copy is refused (so it is never tried again) and return the message for the page."""
        log.warning("no playable copy of %s: %s", video.path, error)
        message = f"no playable copy of {video.path.name} can be made: {_reason(error)}"
        marker = self.folder / f"{video.content_hash}{REFUSED_SUFFIX}"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps({"message": message}), encoding="utf-8")
        except OSError as problem:  # the refusal still holds for this server's life, in its job
            log.warning("cannot keep the refusal of %s's copy in %s: %s", video.path, marker, problem)
        return message

    def forget(self, video_id: str) -> None:
        """Delete the video's copy (the video is removed); one being made is left to finish."""
        with self._lock:
            job = self._jobs.get(video_id)
            if job is not None and job.state in ("queued", "running"):
                return
            self._jobs.pop(video_id, None)
        for suffix in (*self._suffixes, REFUSED_SUFFIX):
            (self.folder / f"{video_id}{suffix}").unlink(missing_ok=True)

    def _start(self, video: Video) -> ProxyJob:
        """The job making ``video``'s copy: the one queued, running, made or failed for good, else a new one."""
        with self._lock:
            job = self._jobs.get(video.content_hash)
            if job is not None and not _stale(job):
                return job
            job = ProxyJob(video.content_hash, video.path.name)
            self._jobs[video.content_hash] = job
        try:
            self._worker.submit(self._make, job, video)
        except RuntimeError:  # the server is closing
            _fail(job, {"error": "Closing", "message": "the server is shutting down", "status": 503}, retry=True)
        return job

    def _make(self, job: ProxyJob, video: Video) -> None:
        job.state = "running"
        started = time.perf_counter()
        assert self.format is not None
        target = self.folder / f"{job.video_id}{self.format.suffix}"

        def progress(share: float) -> None:
            if self._closing.is_set():
                raise _Cancelled()
            job.progress = share

        try:
            job.path = make_proxy(video, target, self.format, progress=progress)
            job.state = "done"
            log.info("made a playable copy of %s (%s) as %s in %.1f s", video.path, self.playability(video).reason,
                     self.format.name, time.perf_counter() - started)
        except _Cancelled:
            _fail(job, {"error": "Closing", "message": "the server is shutting down", "status": 503}, retry=True)
        except VideoError as error:  # the source cannot be decoded, or asks too much: asking again would fail again
            _fail(job, {"error": "VideoError", "status": 422, "message": self._refuse(video, error)})
        except OutputError as error:
            log.error("the playable copy of %s could not be written to %s: %s", video.path, error.path, error.problem)
            _fail(job, {"error": "StorageError", "status": 500,
                        "message": f"the server failed to make a playable copy of {job.name}: {error.problem}; "
                                   "its log says where"}, retry=True)
        except Exception as error:  # noqa: BLE001 - a failed copy ends its job, never the server
            log.error("the playable copy of %s failed", video.path, exc_info=error)
            _fail(job, error_body(error), retry=True)

    def close(self) -> None:
        """Stop the copy under way (at its next frame, its temporary file deleted) and drop those waiting."""
        self._closing.set()
        self._worker.shutdown(wait=True, cancel_futures=True)


def _stale(job: ProxyJob) -> bool:
    """Whether a job is to be made again: it failed a while ago in a way asking again may mend (until then its
    failure is the answer, so a client that polls sees it), or its copy is gone."""
    if job.state == "failed":
        return job.retry and job.failed_at is not None and time.monotonic() - job.failed_at >= RETRY_AFTER_S
    return job.state == "done" and not (job.path and job.path.is_file())


def _fail(job: ProxyJob, error: dict[str, Any], *, retry: bool = False) -> None:
    job.error, job.retry, job.failed_at, job.state = error, retry, time.monotonic(), "failed"


def _reason(error: VideoError) -> str:
    """A source's failure without its path (the server does not show where its files are)."""
    text = str(error).split(": ", 1)[-1]
    return text[:1].lower() + text[1:]
