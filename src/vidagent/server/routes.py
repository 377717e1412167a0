"""The routes under ``/api``: videos, their memory, index jobs, questions, SQL and evidence media."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.types import Receive

from vidagent import __version__
from vidagent.agent.planner import default_planner, planner_names
from vidagent.memory.library_search import MAX_QUERY_CHARS as MAX_SEARCH_CHARS
from vidagent.memory.search_lines import LINE_KINDS
from vidagent.server import sse
from vidagent.server.asks import AskRun
from vidagent.server.auth import same_site_only
from vidagent.server.errors import NoPlayableCopyError
from vidagent.server.events import Event, EventLog
from vidagent.server.schemas import AskBody, ImportBody, IndexBody, RegisterBody, SqlBody
from vidagent.server.service import VideoService
from vidagent.server.uploads import MAX_GIVEN_NAME_CHARS, upload_name

MAKES_FILES = [Depends(same_site_only)]  # a GET route that writes a file: not for a page on another site


def api_router(service: VideoService) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.get("/health", summary="the server is up; how many jobs wait for the models")
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__, "lane_pending": service.lane.pending}

    @router.get("/planners", summary="the planners a question may name")
    def planners() -> dict[str, Any]:
        embedded = service.session.embedded_llm
        return {"planners": planner_names(), "default": default_planner(["video"], embedded=embedded),
                "several_videos": default_planner(["video", "video"], embedded=embedded)}

    @router.get("/videos", summary="the registered videos with their memory stages")
    def list_videos() -> JSONResponse:  # the most frequent request: straight to JSON, no re-validation
        return JSONResponse({"videos": [entry.to_dict() for entry in service.videos()]})

    @router.get("/files", summary="the video files in the --videos folders (registered or not)")
    def files() -> dict[str, Any]:
        return {"folders": [str(folder) for folder in service.folders.folders], "files": service.folder_files()}

    @router.post("/videos", status_code=201, summary="register a video by its path (inside the --videos folders)")
    def register(body: RegisterBody) -> dict[str, Any]:
        return service.register_path(body.path).to_dict()

    @router.post("/videos/upload", status_code=201,
                 summary="upload a video: the raw file as the body, its name as ?filename= (kept under that name)")
    async def upload(request: Request, filename: str | None = Query(None, max_length=MAX_GIVEN_NAME_CHARS)
                     ) -> dict[str, Any]:
        name = upload_name(filename)
        declared = request.headers.get("content-length")
        service.uploads.check_length(int(declared) if declared and declared.isdigit() else None)
        temporary, content_hash = await service.uploads.receive(request.stream())
        entry = await run_in_threadpool(service.register_upload, temporary, content_hash, name)
        return entry.to_dict()

    @router.delete("/videos/{video_id}", summary="remove a video: its memory, and its file if it was uploaded")
    def delete(video_id: str) -> dict[str, Any]:
        return service.delete(video_id)

    @router.get("/videos/{video_id}", summary="one video")
    def video(video_id: str) -> dict[str, Any]:
        return service.video(video_id).to_dict()

    @router.get("/search", summary="moments across every video the server shows: objects, on-screen text, speech "
                                   "and descriptions ranked for the query (meaning, words and object categories)")
    def search(q: str = Query(min_length=1, max_length=MAX_SEARCH_CHARS, description="what to find, e.g. dog"),
               kind: list[str] = Query([], description=f"only lines of these kinds: {', '.join(LINE_KINDS)}"),
               video: str | None = Query(None, max_length=200, description="only this video (its id)"),
               limit: int = Query(12, ge=1, le=100)) -> dict[str, Any]:
        return service.search(q, kinds=kind, video_id=video, limit=limit)

    @router.get("/videos/{video_id}/memory", summary="segments, speech, on-screen text and objects, for a timeline")
    def memory(video_id: str) -> dict[str, Any]:
        return service.memory(video_id)

    @router.post("/videos/{video_id}/index", status_code=202, summary="build the memory in the background")
    def index(video_id: str, body: IndexBody | None = None) -> dict[str, Any]:
        job = service.index(video_id, body.stages if body else None)
        return job.to_dict()

    @router.post("/import", status_code=202,
                 summary="import a released caption set (inside the --videos folders) as memories without video files")
    async def import_captions(body: ImportBody) -> Any:
        job = await run_in_threadpool(service.import_captions, body.path, format=body.format,
                                      namespace=body.namespace, captioner=body.captioner, only=body.only)
        if not body.wait:
            return job.to_dict()
        assert job.future is not None
        await asyncio.wrap_future(job.future)
        if job.error is not None:
            return JSONResponse(job.error, status_code=int(job.error["status"]))
        return JSONResponse(job.to_dict(), status_code=200)

    @router.get("/jobs/{job_id}", summary="an index or import job's state (an import's report when done)")
    def job(job_id: str) -> dict[str, Any]:
        return service.job(job_id).to_dict()

    @router.get("/jobs/{job_id}/events", summary="an index or import job's progress as server-sent events")
    def job_events(job_id: str) -> StreamingResponse:
        job = service.job(job_id)
        return StreamingResponse(sse.stream(job.events), media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)

    @router.post("/videos/{video_id}/sql", summary="one read-only SQL statement over the video's memory")
    def sql(video_id: str, body: SqlBody) -> dict[str, Any]:
        result = service.sql(video_id, body.query, body.max_rows)
        return {**result.to_json(), "seconds": round(result.seconds, 4)}

    @router.post("/ask", summary="ask and wait: the answer as JSON (with its trace); a client that goes away "
                                 "stops its question")
    async def ask(body: AskBody, request: Request) -> Any:
        run = await run_in_threadpool(service.start_ask, body.spec())
        return await _answered(run, request.receive)

    @router.post("/ask/stream", summary="ask and watch: queued, started, each step, then the answer, as SSE")
    async def ask_stream(body: AskBody) -> StreamingResponse:
        run = await run_in_threadpool(service.start_ask, body.spec())
        return StreamingResponse(sse.stream(run.events, on_abandon=run.cancel), media_type=sse.MEDIA_TYPE,
                                 headers=sse.HEADERS)

    @router.get("/videos/{video_id}/playback", dependencies=MAKES_FILES,
                summary="how the video plays in a browser: its own file, or a playable copy (made once, in the "
                        "background, when the file's format is not one browsers play; its progress while it is made)")
    def playback(video_id: str, proxy: bool = Query(False, description="a copy even of a file that should play "
                                                                        "as it is (one the browser failed to play)")
                 ) -> dict[str, Any]:
        return service.playback(video_id, force_copy=proxy).to_dict()

    @router.get("/videos/{video_id}/file", dependencies=MAKES_FILES,
                summary="the video for a player (supports ranges): its own file, or its playable copy where browsers "
                        "do not play the file (202 with the copy's progress while it is made; ?original=true: the file "
                        "as it is)")
    def file(video_id: str, original: bool = Query(False), proxy: bool = Query(False)) -> Response:
        entry = service.video(video_id)
        if original:
            service.handle(video_id)  # the file is still there and still this video
            return FileResponse(entry.path, media_type=_video_type(entry.path), filename=entry.name,
                                content_disposition_type="inline")
        play = service.playback(video_id, force_copy=proxy)
        if play.state == "failed":
            raise NoPlayableCopyError(play.message, status=play.status)
        if not play.ready:
            return JSONResponse(play.to_dict(), status_code=202, headers={"Retry-After": "2"})
        assert play.path is not None
        if play.source == "original":
            return FileResponse(play.path, media_type=_video_type(str(play.path)), filename=entry.name,
                                content_disposition_type="inline")
        return FileResponse(play.path, media_type=play.media_type, filename=Path(entry.name).stem + play.path.suffix,
                            content_disposition_type="inline")

    @router.get("/videos/{video_id}/frame", summary="the frame at t seconds as a JPEG thumbnail")
    def frame(video_id: str, t: float = Query(ge=0, allow_inf_nan=False), width: int = Query(320)) -> Response:
        data = service.thumbnail(video_id, t, width)
        return Response(data, media_type="image/jpeg", headers={"Cache-Control": "max-age=3600"})

    @router.get("/videos/{video_id}/clip", summary="the start-end stretch as a short mp4, cut on demand",
                dependencies=MAKES_FILES)
    def clip(video_id: str, start: float = Query(ge=0, allow_inf_nan=False),
             end: float = Query(gt=0, allow_inf_nan=False)) -> FileResponse:
        return FileResponse(service.clip(video_id, start, end), media_type="video/mp4")

    return router


async def _answered(run: AskRun, receive: Receive) -> Any:
    """The question's answer as JSON once it comes, or the error its events end with (its failure, or the server
    shutting down). A client that goes away first cancels it, as a stream's does (``AskRun.cancel``): a question
    still waiting is dropped, a running one stops at its next step, and the model lane is free for the next."""
    ended = asyncio.ensure_future(_last_event(run.events))
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({ended, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ended.cancel()
        gone.cancel()
    if not ended.done() or ended.cancelled():
        run.cancel()
        raise ClientDisconnect()
    event = ended.result()
    if event.name == "error":
        return JSONResponse(event.data, status_code=int(event.data["status"]))
    assert run.future is not None
    return (await asyncio.wrap_future(run.future)).to_dict()


async def _last_event(events: EventLog) -> Event:
    """The event a log ends with (an answer or an error), once it is published."""
    last = None
    async for last in events.follow():
        pass
    assert last is not None
    return last


async def _disconnected(receive: Receive) -> None:
    """Return once the client has gone (the request's body was read already: what comes next is its going)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _video_type(path: str) -> str:
    suffix = path.rsplit(".", 1)[-1].lower()
    return {"mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime", "webm": "video/webm",
            "mkv": "video/x-matroska", "ogv": "video/ogg", "avi": "video/x-msvideo", "gif": "image/gif"}.get(
        suffix, "application/octet-stream")

