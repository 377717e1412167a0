"""The utility edits over HTTP (DoraemonGPT's utility tools without a question), and the files they make.

``GET /api/videos/{id}/edits/clip?start=&end=``, ``.../edits/highlight?object_id=``,
``.../edits/remove?object_id=`` and ``.../edits/frames?start=&end=&fps=`` answer with the file (frames
as a zip of the images); ``GET /api/artifacts/{name}`` with any file an edit or an answer's tool made
(the links an answer's steps carry in ``artifacts["file"]``). Every edit is kept in the library's
artifacts folder, named by content, so asking again costs nothing. An object's edit runs in the model
lane: it may build the video's object memory first (with the models), and it waits its turn behind the
builds and questions before it; a clip and frames need no model and run at once. A file the server
cannot write is a 500 ``StorageError`` that says what went wrong but not where; the log says where.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import zipfile
from pathlib import Path
from typing import Any, Callable

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from vidagent.errors import OutputError, ToolInputError
from vidagent.memory.builder import MemoryBuilder
from vidagent.server.errors import NotFoundError, RequestError, StorageError
from vidagent.server.lane import ModelLane
from vidagent.tools.edits import Edit, VideoEdits, object_track
from vidagent.video.video import Video, error_reason

log = logging.getLogger(__name__)

# what an edit's file is called in the artifacts folder (tools/edits.py names them); nothing else is served
ARTIFACT_NAME = re.compile(r"^(clip|highlight|remove|frames)-[0-9a-f]{12}-[0-9a-f]{16}(\.mp4|\.zip)?$")


class ServerEdits:
    """The edits of the server's videos (``handle`` opens one by id), kept in ``artifacts_dir``."""

    def __init__(self, artifacts_dir: Path, lane: ModelLane, handle: Callable[[str], Video],
                 builder: Callable[[], MemoryBuilder], max_queued: int) -> None:
        self.artifacts_dir = artifacts_dir
        self.lane, self.handle, self.builder, self.max_queued = lane, handle, builder, max_queued

    def clip(self, video_id: str, start_s: float, end_s: float) -> Edit:
        return _refusing(lambda: self._edits(video_id).clip(start_s, end_s), "clip")

    def frames(self, video_id: str, start_s: float, end_s: float, fps: float) -> Path:
        return _refusing(lambda: self.zipped(self._edits(video_id).frames(start_s, end_s, fps).path), "frames")

    async def object_edit(self, video_id: str, object_id: int, kind: str) -> Edit:
        """Highlight or remove an object, in the model lane (building the object memory first if needed)."""
        # an unknown id or a memory without a file is refused before queueing; opening a file not yet seen
        # hashes it, which must not hold up the event loop
        video = await run_in_threadpool(self.handle, video_id)

        def run() -> Edit:
            memory = self.builder().build(video, ["objects"], progress=False)
            edits = VideoEdits(video, self.artifacts_dir)
            found = _refusing(lambda: object_track(memory, object_id))
            return _refusing(lambda: edits.highlight(found) if kind == "highlight" else edits.remove(found), kind)

        return await asyncio.wrap_future(self.lane.submit(run, limit=self.max_queued))

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

    def _edits(self, video_id: str) -> VideoEdits:
        return VideoEdits(self.handle(video_id), self.artifacts_dir)


def _refusing(make: Callable[[], Any], kind: str = "edit") -> Any:
    """``make()``, with an edit's refusal of its input (a window outside the video, an unknown object) as a
    422 naming the problem, and an output the server cannot write as a 500 that names no path (the log does)."""
    try:
        return make()
    except ToolInputError as error:
        raise RequestError(str(error), status=422) from None
    except OutputError as error:
        log.error("the %s could not be written to %s: %s", kind, error.path, error.problem)
        raise StorageError(f"the server failed to make the {kind}: {error.problem}; its log says where") from None


def edits_router(edits: ServerEdits) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.get("/videos/{video_id}/edits/clip", summary="the start-end stretch as an mp4 with its sound (a download)")
    async def clip(video_id: str, start: float = Query(ge=0), end: float = Query(gt=0)) -> FileResponse:
        return _download((await run_in_threadpool(edits.clip, video_id, start, end)).path)

    @router.get("/videos/{video_id}/edits/highlight",
                summary="the object's box, label and path drawn where it is seen, as an mp4 (a download)")
    async def highlight(video_id: str, object_id: int = Query(ge=0)) -> FileResponse:
        return _download((await edits.object_edit(video_id, object_id, "highlight")).path)

    @router.get("/videos/{video_id}/edits/remove", summary="the video with the object painted out, as an mp4")
    async def remove(video_id: str, object_id: int = Query(ge=0)) -> FileResponse:
        return _download((await edits.object_edit(video_id, object_id, "remove")).path)

    @router.get("/videos/{video_id}/edits/frames", summary="the frames of start-end at fps a second, as a zip of images")
    async def frames(video_id: str, start: float = Query(ge=0), end: float = Query(ge=0),
                     fps: float = Query(1.0, gt=0, le=30)) -> FileResponse:
        return _download(await run_in_threadpool(edits.frames, video_id, start, end, fps))

    @router.get("/artifacts/{name}", summary="a file an edit or an answer's tool made (a folder of frames as a zip)")
    async def artifact(name: str) -> FileResponse:
        return _download(await run_in_threadpool(edits.artifact, name))

    return router


def _download(path: Path) -> FileResponse:
    media_type = "application/zip" if path.suffix == ".zip" else "video/mp4"
    return FileResponse(path, media_type=media_type, filename=path.name, content_disposition_type="attachment")
