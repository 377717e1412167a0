"""Starting the servers: ``vidagent serve`` (API, page and MCP on uvicorn), ``vidagent mcp`` (stdio or
streamable HTTP), and ``BackgroundServer`` for tests and benchmarks (a loopback port in a thread).

A server told to stop (SIGTERM, Ctrl-C) first stops the questions under way, so each streamed question ends
with an error event that says why (``ServerShuttingDown``) before uvicorn closes its connection.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from typing import Any, Callable, Literal

import uvicorn
from starlette.types import ASGIApp

from vidagent.server.app import create_app
from vidagent.server.auth import add_guards
from vidagent.server.config import ServeConfig
from vidagent.server.errors import ServeSetupError
from vidagent.server.mcp_server import build_mcp, mcp_http_app
from vidagent.server.service import VideoService
from vidagent.session import Session

log = logging.getLogger(__name__)
Transport = Literal["stdio", "http"]


def check_port(host: str, port: int) -> None:
    """Refuse at once (``ServeSetupError``, exit 2) a port another process holds, before the models load
    and before "serving" is logged: uvicorn would only log the failure and exit with its own code."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a port in TIME_WAIT is free
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as error:
            reason = "in use by another process" if error.errno == errno.EADDRINUSE else error.strerror
            raise ServeSetupError(f"cannot listen on {host}:{port}: {reason} (choose another with --port)") from None


class StoppingServer(uvicorn.Server):
    """uvicorn's server that, once told to exit, calls ``before_shutdown`` (in its event loop) before it closes
    the connections still open and waits for their responses to end."""

    def __init__(self, config: uvicorn.Config, before_shutdown: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self._before_shutdown = before_shutdown

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._before_shutdown is not None:
            self._before_shutdown()
        await super().shutdown(sockets)


def _run_uvicorn(app: ASGIApp, config: ServeConfig, service: VideoService, log_level: str) -> None:
    """Serve ``app`` on the configured address until interrupted; on the way out, the questions under way end
    their events with ``ServerShuttingDown`` first."""
    server = StoppingServer(uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level,
                                           timeout_graceful_shutdown=5), before_shutdown=service.asks.cancel_all)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:
        raise ServeSetupError(f"the server did not start on {config.host}:{config.port} (its log says why)")


def serve(config: ServeConfig, *, session: Session | None = None, log_level: str = "info") -> None:
    """Run the API, the web page and the MCP endpoint until interrupted."""
    config.check_binding()
    check_port(config.host, config.port)
    service = VideoService(config, session)
    try:
        log.info("vidagent serving http://%s:%d/ (videos from %s)", config.host, config.port,
                 service.folders.describe())
        _run_uvicorn(create_app(service), config, service, log_level)
    finally:
        service.close()


def run_mcp(config: ServeConfig, transport: Transport = "stdio", *, log_level: str = "warning") -> None:
    """Serve the MCP tools over stdio (for a desktop agent that starts the process) or streamable HTTP."""
    service = VideoService(config)
    try:
        if transport == "stdio":
            build_mcp(service).run("stdio")
            return
        config.check_binding()
        check_port(config.host, config.port)
        _run_uvicorn(mcp_app(service), config, service, log_level)
    finally:
        service.close()


def mcp_app(service: VideoService) -> ASGIApp:
    """The MCP tools alone over streamable HTTP at ``/mcp`` (``vidagent mcp --transport http``), behind the same
    token, Host and Origin checks as ``vidagent serve``."""
    app = mcp_http_app(service)
    add_guards(app, token=service.config.token, host=service.config.host)
    return app


class BackgroundServer:
    """An ASGI app served on a free loopback port in a daemon thread, for as long as the ``with`` lasts
    (``before_shutdown``: called as it begins to stop, as ``vidagent serve`` stops the questions under way)."""

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", *, before_shutdown: Callable[[], None] | None = None,
                 **options: Any) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, 0))
        self.host, self.port = self._socket.getsockname()[:2]
        config = uvicorn.Config(app, log_level=options.pop("log_level", "warning"), timeout_graceful_shutdown=2,
                                **options)
        self._server = StoppingServer(config, before_shutdown)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name="vidagent-test-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the background server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Begin to stop, as SIGTERM has ``vidagent serve`` do (the connections open may still finish)."""
        self._server.should_exit = True

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._thread.join(timeout=10)
        self._socket.close()
