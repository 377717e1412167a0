"""The FastAPI app: the API routes, the web page at ``/``, JSON errors for every failure, the token guard."""

from __future__ import annotations

import contextlib
import logging
from importlib import resources
from pathlib import Path
from typing import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from vidagent import __version__
from vidagent.errors import VidagentError
from vidagent.server.auth import add_guards
from vidagent.server.edits import edits_router
from vidagent.server.errors import error_body, status_of
from vidagent.server.mcp_server import mcp_http_app
from vidagent.server.routes import api_router
from vidagent.server.service import VideoService

log = logging.getLogger(__name__)


def static_dir() -> Path:
    return Path(str(resources.files("vidagent.server").joinpath("static")))


def create_app(service: VideoService, *, with_mcp: bool = True) -> FastAPI:
    """The app over ``service``: the API, the page, and (``with_mcp``) the MCP tools at ``/mcp``. With a
    token, /api and /mcp need it; without one (loopback only), requests must name a loopback host, so a
    web page elsewhere cannot reach the API by DNS rebinding (``auth.add_guards``)."""
    mcp_app = mcp_http_app(service) if with_mcp else None

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with (mcp_app.router.lifespan_context(mcp_app) if mcp_app else contextlib.nullcontext()):
            yield

    # docs_url None: FastAPI's Swagger UI loads its scripts from a CDN and is blank offline; /docs is the
    # package's own page over /openapi.json instead
    app = FastAPI(title="vidagent", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Answer questions about videos: register or upload videos, build their memory, "
                              "ask with any planner and watch the steps arrive, query the memory with SQL.")
    app.include_router(api_router(service))
    app.include_router(edits_router(service.edits))
    if mcp_app is not None:
        app.router.routes.extend(mcp_app.routes)
    _add_error_handlers(app)
    static = static_dir()
    app.mount("/static", StaticFiles(directory=static), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(static / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/docs", include_in_schema=False)
    def docs() -> FileResponse:
        return FileResponse(static / "docs.html", headers={"Cache-Control": "no-cache"})

    add_guards(app, token=service.config.token, host=service.config.host)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = error.errors()
        content_type = request.headers.get("content-type", "")
        if request.method == "POST" and "json" not in content_type.lower() \
                and any(tuple(p.get("loc", ()))[:1] == ("body",) for p in problems):
            return JSONResponse({"error": "UnsupportedMediaType", "status": 415,
                                 "message": f"send the body as JSON with 'Content-Type: application/json' "
                                            f"(got {content_type or 'no content type'!r})"}, status_code=415)
        malformed = any(p.get("type") == "json_invalid" for p in problems)
        where = "; ".join(f"{'.'.join(str(x) for x in p.get('loc', ()))}: {p.get('msg')}" for p in problems[:5])
        status = 400 if malformed else 422
        return JSONResponse({"error": "MalformedBody" if malformed else "InvalidRequest", "status": status,
                             "message": f"the request body is not valid JSON ({where})" if malformed else where},
                            status_code=status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": "NotFound" if error.status_code == 404 else "HTTPError",
                             "message": str(error.detail), "status": error.status_code},
                            status_code=error.status_code, headers=getattr(error, "headers", None))

    async def json_error(request: Request, error: Exception) -> JSONResponse:
        status = status_of(error)
        if status >= 500:
            log.error("%s %s failed", request.method, request.url.path, exc_info=error)
        else:
            log.info("%s %s: %s %s", request.method, request.url.path, status, error)
        return JSONResponse(error_body(error), status_code=status)

    async def client_gone(request: Request, error: Exception) -> JSONResponse:
        log.info("%s %s: the client went away mid-request", request.method, request.url.path)
        return JSONResponse({"error": "ClientDisconnected", "message": "the client went away", "status": 400},
                            status_code=400)

    app.add_exception_handler(ClientDisconnect, client_gone)
    for kind in (VidagentError, ValueError, Exception):  # Exception: a bug still answers JSON (and is logged)
        app.add_exception_handler(kind, json_error)
