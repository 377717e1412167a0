"""The utility edits over HTTP (DoraemonGPT's utility tools without a question), and the files they make.

``GET /api/videos/{id}/edits/clip?start=&end=``, ``.../edits/highlight?object_id=``,
``.../edits/remove?object_id=`` and ``.../edits/frames?start=&end=&fps=`` answer with the file (frames
as a zip of the images); ``GET /api/artifacts/{name}`` with any file an edit or an answer's tool made
(the links an answer's steps carry in ``artifacts["file"]``). Every edit is kept in the library's
artifacts folder, named by content, so asking again costs nothing, and two identical requests at once
make it once (``VideoEdits``).

The pixel work runs in the edits' own threads, never in the model lane: an encode takes seconds to
minutes and the questions queued in the lane would wait on it. Only an object's lookup goes through
the lane, because it may build the video's object memory first (with the models). At most
``max_edits`` edits are made at once, and one more is refused at once (429 ``TooManyEditsError``)
rather than queued: x264 already spreads one encode over the cores, so a queue would only hold HTTP
requests open for minutes (their clients timing out while the work goes on), and a client told to
come back later loses nothing, since a finished edit is answered from its file. An edit covers at
most ``max_edit_seconds`` of the video (422 ``EditTooLongError`` naming the setting). A file the
server cannot write is a 500 ``StorageError`` that says what went wrong but not where; the log says
where.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, TypeVar

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from vidagent.errors import OutputError, ToolInputError
from vidagent.memory.builder import MemoryBuilder
from vidagent.server.errors import (EditTooLongError, NotFoundError, RequestError, StorageError,
                                    TooManyEditsError)
from vidagent.server.lane import ModelLane
from vidagent.tools.edits import EditTooLong, ObjectTrack, VideoEdits, object_track
from vidagent.video.video import Video, error_reason

T = TypeVar("T")
log = logging.getLogger(__name__)
# what an edit's file is called in the artifacts folder (tools/edits.py names them); nothing else is served
ARTIFACT_NAME = re.compile(r"^(clip|highlight|remove|frames)-[0-9a-f]{12}-[0-9a-f]{16}(\.mp4|\.zip)?$")


class ServerEdits:
    """The edits of the server's videos (``handle`` opens one by id), kept in ``artifacts_dir``: each covers at
    most ``max_seconds`` of its video, and at most ``max_running`` are made at once."""

    def __init__(self, artifacts_dir: Path, lane: ModelLane, handle: Callable[[str], Video],
                 builder: Callable[[], MemoryBuilder], max_queued: int, *, max_seconds: float,
                 max_running: int) -> None:
        self.artifacts_dir = artifacts_dir
        self.lane, self.handle, self.builder, self.max_queued = lane, handle, builder, max_queued
        self.max_seconds, self.max_running = max_seconds, max_running
        self._workers = ThreadPoolExecutor(max_workers=max_running, thread_name_prefix="vidagent-edits")
        self._running = 0
        self._running_lock = threading.Lock()

    async def clip(self, video_id: str, start_s: float, end_s: float) -> Path:
        video = await run_in_threadpool(self.handle, video_id)  # a file not seen yet is hashed: off the event loop
        return await self._make("clip", lambda: self._edits(video).clip(start_s, end_s).path)

    async def frames(self, video_id: str, start_s: float, end_s: float, fps: float) -> Path:
        video = await run_in_threadpool(self.handle, video_id)
        return await self._make("frames", lambda: self.zipped(self._edits(video).frames(start_s, end_s, fps).path))

    async def object_edit(self, video_id: str, object_id: int, kind: str) -> Path:
        """Highlight or remove an object: its boxes looked up in the model lane (building the object memory
        first if needed), the video made in the edits' threads."""
        # an unknown id or a memory without a file is refused before queueing
        video = await run_in_threadpool(self.handle, video_id)

        def locate() -> ObjectTrack:
            memory = self.builder().build(video, ["objects"], progress=False)
            return _refusing(lambda: object_track(memory, object_id))

        found = await asyncio.wrap_future(self.lane.submit(locate, limit=self.max_queued))
        edits = self._edits(video)
        make = edits.highlight if kind == "highlight" else edits.remove
        return await self._make(kind, lambda: make(found).path)

    async def _make(self, kind: str, job: Callable[[], T]) -> T:
        """``job()`` in the edits' threads, or a ``TooManyEditsError`` when ``max_running`` edits are under way."""
        with self._running_lock:
            if self._running >= self.max_running:
                raise TooManyEditsError(
                    f"{self._running} edits are being made, as many as this server makes at once (max_edits = "
                    f"{self.max_running}, `vidagent serve --max-edits`); try again when one is done (a finished "
                    "edit is answered at once)")
            self._running += 1
        try:
            future = self._workers.submit(_refusing, job, kind)
        except RuntimeError:  # the server is closing
            self._finished()
            raise
        future.add_done_callback(lambda _: self._finished())  # made, failed or cancelled alike
        return await asyncio.wrap_future(future)

    def _finished(self) -> None:
        with self._running_lock:
            self._running -= 1

    def artifact(self, name: str) -> Path:
        """The file an edit made, by its name (a folder of frames as a zip)."""
        if not ARTIFACT_NAME.match(name):
            raise NotFoundError(f"no file named {name!r}: files are named like clip-<video>-<key>.mp4")
        path = self.artifacts_dir / name
        if path.is_dir():
            return _refusing(lambda: self.zipped(path), "frames")
        if not path.is_file():
            raise NotFoundError(f"no file named {name!r} (made on another server, or removed?)")
        return path

    def zipped(self, folder: Path) -> Path:
        """A folder of images as a zip beside it (made once; written under a temporary name first)."""
        target = folder.with_name(folder.name + ".zip")
        if target.is_file():
            return target
        temporary = folder.with_name(f".{folder.name}.{os.getpid()}-{secrets.token_hex(4)}.part.zip")
        try:
            with zipfile.ZipFile(temporary, "w", zipfile.ZIP_STORED) as archive:  # images are compressed already
                for path in sorted(folder.iterdir()):
                    archive.write(path, f"{folder.name}/{path.name}")
            os.replace(temporary, target)
        except OSError as error:
            raise OutputError(target, f"cannot write the zip ({error_reason(error)})") from error
        finally:
            temporary.unlink(missing_ok=True)
        return target

    def close(self) -> None:
        """Drop the edits still waiting and wait for those under way."""
        self._workers.shutdown(wait=True, cancel_futures=True)

    def _edits(self, video: Video) -> VideoEdits:
        return VideoEdits(video, self.artifacts_dir, max_seconds=self.max_seconds)


def _refusing(make: Callable[[], T], kind: str = "edit") -> T:
    """``make()``, with an edit's refusal of its input (a window outside the video, an unknown object) as a
    422 naming the problem, an edit over ``max_edit_seconds`` as a 422 naming the setting, and an output the
    server cannot write as a 500 that names no path (the log does)."""
    try:
        return make()
    except EditTooLong as error:
        raise EditTooLongError(f"the {error.kind} would cover {error.seconds:.1f} s of the video; this server makes "
                               f"edits of at most {error.limit:g} s (max_edit_seconds, `vidagent serve "
                               "--max-edit-seconds`): ask for a shorter window") from None
    except ToolInputError as error:
        raise RequestError(str(error), status=422) from None
    except OutputError as error:
        log.error("the %s could not be written to %s: %s", kind, error.path, error.problem)
        raise StorageError(f"the server failed to make the {kind}: {error.problem}; its log says where") from None


def edits_router(edits: ServerEdits) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.get("/videos/{video_id}/edits/clip", summary="the start-end stretch as an mp4 with its sound (a download)")
    async def clip(video_id: str, start: float = Query(ge=0), end: float = Query(gt=0)) -> FileResponse:
        return _download(await edits.clip(video_id, start, end))

    @router.get("/videos/{video_id}/edits/highlight",
                summary="the object's box, label and path drawn where it is seen, as an mp4 (a download)")
    async def highlight(video_id: str, object_id: int = Query(ge=0)) -> FileResponse:
        return _download(await edits.object_edit(video_id, object_id, "highlight"))

    @router.get("/videos/{video_id}/edits/remove", summary="the video with the object painted out, as an mp4")
    async def remove(video_id: str, object_id: int = Query(ge=0)) -> FileResponse:
        return _download(await edits.object_edit(video_id, object_id, "remove"))

    @router.get("/videos/{video_id}/edits/frames", summary="the frames of start-end at fps a second, as a zip of images")
    async def frames(video_id: str, start: float = Query(ge=0), end: float = Query(ge=0),
                     fps: float = Query(1.0, gt=0, le=30)) -> FileResponse:
        return _download(await edits.frames(video_id, start, end, fps))

    @router.get("/artifacts/{name}", summary="a file an edit or an answer's tool made (a folder of frames as a zip)")
    async def artifact(name: str) -> FileResponse:
        return _download(await run_in_threadpool(edits.artifact, name))

    return router


def _download(path: Path) -> FileResponse:
    media_type = "application/zip" if path.suffix == ".zip" else "video/mp4"
    return FileResponse(path, media_type=media_type, filename=path.name, content_disposition_type="attachment")
