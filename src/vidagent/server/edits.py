"""The utility edits over HTTP (DoraemonGPT's utility tools without a question), and the files they make.

``GET /api/videos/{id}/edits/clip?start=&end=``, ``.../edits/highlight?object_id=``,
``.../edits/remove?object_id=`` and ``.../edits/frames?start=&end=&fps=`` answer with the file (frames
as a zip of the images); ``GET /api/videos/{id}/refer?expression=`` resolves a referring expression to an
object and answers with its masks as JSON (``refer_object``), its PNG masks, manifest and overlay video
kept as a folder (``/api/artifacts/segment-...`` as a zip, ``.../overlay.mp4`` and ``.../masks.json`` alone);
``GET /api/artifacts/{name}`` with any file an edit or an answer's tool made
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
from typing import Any, Callable, TypeVar

from fastapi import APIRouter, Depends, Query
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from vidagent.errors import OutputError, ToolInputError
from vidagent.memory.builder import MemoryBuilder
from vidagent.server.auth import same_site_only
from vidagent.server.errors import (EditTooLongError, NotFoundError, RequestError, StorageError,
                                    TooManyEditsError)
from vidagent.server.lane import ModelLane
from vidagent.llm.base import ChatModel
from vidagent.tools.edits import EditTooLong, ObjectTrack, VideoEdits, object_track
from vidagent.tools.object_masks import MANIFEST, OVERLAY
from vidagent.tools.refer import ReferTools, Segmentation
from vidagent.tools.referent import Referent
from vidagent.video.video import Video, error_reason

T = TypeVar("T")
log = logging.getLogger(__name__)
# what an edit's file is called in the artifacts folder (tools/edits.py names them); nothing else is served
ARTIFACT_NAME = re.compile(r"^(clip|highlight|remove|frames|segment)-[0-9a-f]{12}-[0-9a-f]{16}(\.mp4|\.zip)?$")
SEGMENT_PARTS = {OVERLAY: "video/mp4", MANIFEST: "application/json"}  # a segmentation folder's files served alone


class ServerEdits:
    """The edits of the server's videos (``handle`` opens one by id), kept in ``artifacts_dir``: each covers at
    most ``max_seconds`` of its video, and at most ``max_running`` are made at once."""

    def __init__(self, artifacts_dir: Path, lane: ModelLane, handle: Callable[[str], Video],
                 builder: Callable[[], MemoryBuilder], max_queued: int, *, max_seconds: float,
                 max_running: int, chat: Callable[[], ChatModel | None] = lambda: None) -> None:
        self.artifacts_dir = artifacts_dir
        self.chat = chat  # the chat model refer_object may ask (None: none configured)
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

    async def refer(self, video_id: str, expression: str) -> Segmentation:
        """The object ``expression`` refers to, resolved in the model lane (building the object memory first if
        needed, asking the chat model only where the parser cannot decide), its masks saved in the edits' threads."""
        video = await run_in_threadpool(self.handle, video_id)

        def locate() -> tuple[ReferTools, Referent]:
            memory = self.builder().build(video, ["objects"], progress=False)
            tools = ReferTools(memory, self.artifacts_dir, self.chat())
            return tools, _refusing(lambda: tools.resolve(expression))

        tools, referent = await asyncio.wrap_future(self.lane.submit(locate, limit=self.max_queued))
        return await self._make("segment", lambda: tools.save(referent, max_seconds=self.max_seconds))

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

    def artifact(self, name: str, part: str | None = None) -> Path:
        """The file an edit made, by its name (a folder of frames or masks as a zip); ``part`` names one file of a
        segmentation's folder (``overlay.mp4``, ``masks.json``)."""
        if part is not None:
            if not name.startswith("segment-") or part not in SEGMENT_PARTS or not ARTIFACT_NAME.match(name):
                raise NotFoundError(f"no file {name}/{part}: a segmentation's folder serves "
                                    f"{' and '.join(SEGMENT_PARTS)}")
            path = self.artifacts_dir / name / part
            if not path.is_file():
                raise NotFoundError(f"no file {name}/{part} (made on another server, or removed?)")
            return path
        if not ARTIFACT_NAME.match(name):
            raise NotFoundError(f"no file named {name!r}: files are named like clip-<video>-<key>.mp4")
        path = self.artifacts_dir / name
        if path.is_dir():
            return _refusing(lambda: self.zipped(path), "segment" if name.startswith("segment-") else "frames")
        if not path.is_file():
            raise NotFoundError(f"no file named {name!r} (made on another server, or removed?)")
        return path

    def zipped(self, folder: Path) -> Path:
        """A folder (of images; a segmentation's masks, manifest and overlay) as a zip beside it (made once; written
        under a temporary name first)."""
        target = folder.with_name(folder.name + ".zip")
        if target.is_file():
            return target
        temporary = folder.with_name(f".{folder.name}.{os.getpid()}-{secrets.token_hex(4)}.part.zip")
        try:
            with zipfile.ZipFile(temporary, "w", zipfile.ZIP_STORED) as archive:  # images are compressed already
                for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                    archive.write(path, f"{folder.name}/{path.relative_to(folder)}")
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
    """The edit routes: each makes (or zips) a file, so a browser's request from another site is refused."""
    router = APIRouter(prefix="/api", dependencies=[Depends(same_site_only)])

    @router.get("/videos/{video_id}/edits/clip", summary="the start-end stretch as an mp4 with its sound (a download)")
    async def clip(video_id: str, start: float = Query(ge=0, allow_inf_nan=False),
                   end: float = Query(gt=0, allow_inf_nan=False)) -> FileResponse:
        return _download(await edits.clip(video_id, start, end))

    @router.get("/videos/{video_id}/edits/highlight",
                summary="the object's box, label and path drawn where it is seen, as an mp4 (a download)")
    async def highlight(video_id: str, object_id: int = Query(ge=0)) -> FileResponse:
        return _download(await edits.object_edit(video_id, object_id, "highlight"))

    @router.get("/videos/{video_id}/edits/remove", summary="the video with the object painted out, as an mp4")
    async def remove(video_id: str, object_id: int = Query(ge=0)) -> FileResponse:
        return _download(await edits.object_edit(video_id, object_id, "remove"))

    @router.get("/videos/{video_id}/edits/frames", summary="the frames of start-end at fps a second, as a zip of images")
    async def frames(video_id: str, start: float = Query(ge=0, allow_inf_nan=False),
                     end: float = Query(ge=0, allow_inf_nan=False),
                     fps: float = Query(1.0, gt=0, le=30, allow_inf_nan=False)) -> FileResponse:
        return _download(await edits.frames(video_id, start, end, fps))

    @router.get("/videos/{video_id}/refer",
                summary="the object an expression refers to, with its mask in each sampled frame (COCO run-length "
                        "counts) and links to its PNG masks (a zip) and the video with the mask drawn")
    async def refer(video_id: str, expression: str = Query(min_length=1, max_length=300)) -> dict[str, Any]:
        found = await edits.refer(video_id, expression)
        return segmentation_json(found)

    @router.get("/artifacts/{name}/{part}", summary="one file of a segmentation's folder: overlay.mp4 or masks.json")
    async def artifact_part(name: str, part: str) -> FileResponse:
        path = await run_in_threadpool(edits.artifact, name, part)
        return FileResponse(path, media_type=SEGMENT_PARTS[part], filename=f"{name}-{part}",
                            content_disposition_type="inline")

    @router.get("/artifacts/{name}", summary="a file an edit or an answer's tool made (a folder of frames as a zip)")
    async def artifact(name: str) -> FileResponse:
        return _download(await run_in_threadpool(edits.artifact, name))

    return router


def segmentation_json(found: Segmentation) -> dict[str, Any]:
    """A segmentation for a client: what was referred to, links to its files, and each frame's mask as COCO's
    uncompressed run-length counts (column-major runs from background) over the displayed frame."""
    import supervision as sv

    name = found.folder.name
    out = found.to_dict()
    out["links"] = {"masks": f"/api/artifacts/{name}", "overlay": f"/api/artifacts/{name}/{OVERLAY}",
                    "manifest": f"/api/artifacts/{name}/{MANIFEST}"}
    for frame, mask in zip(out["frames"], found.masks):
        frame["counts"] = [int(v) for v in sv.mask_to_rle(mask.mask, compressed=False)]
    return out


def _download(path: Path) -> FileResponse:
    media_type = "application/zip" if path.suffix == ".zip" else "video/mp4"
    return FileResponse(path, media_type=media_type, filename=path.name, content_disposition_type="attachment")
