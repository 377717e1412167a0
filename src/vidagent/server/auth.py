"""Who may talk to the server (plain ASGI middleware, for the HTTP API and the MCP endpoint alike).

``TokenGuard``: with a token,
a request to a protected path needs ``Authorization: Bearer TOKEN``; the web page, which cannot put
headers on ``<video>`` and ``<img>`` requests, may send the token as the ``vidagent_token`` cookie
(set by the page itself, SameSite=Strict) instead.

``LoopbackHostGuard``: without a token (loopback only), a request must name a loopback host (``localhost``,
any address of 127.0.0.0/8, ``[::1]``, with a port or none, and nothing else), so a web page elsewhere cannot
reach the server through DNS rebinding.

``SameOriginGuard``: a browser request from another site may not change anything under ``/api``
(cross-site request forgery: an upload needs no CORS preflight), nor reach ``/mcp`` at all; a GET route
that makes files (a clip, an edit, a playable copy) refuses it too, by the dependency ``same_site_only``.

``add_guards`` puts them on an app, for ``vidagent serve`` and ``vidagent mcp --transport http`` alike (the
MCP SDK's own Host check covers only 127.0.0.1, localhost and ::1, and is turned off for these).
"""

from __future__ import annotations

import hmac
import json
import re
from http.cookies import SimpleCookie
from typing import Iterable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from vidagent.server.config import check_token, is_loopback
from vidagent.server.errors import CrossSiteError, error_body

COOKIE = "vidagent_token"
# a Host header: a name or an address (IPv6 in brackets), then a port or nothing; anything else
# (``127.0.0.1:8000@evil.example``, a path, spaces) names no host this server answers to
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9.-]+))(?::(?P<port>[0-9]{1,5}))?")


class TokenGuard:
    def __init__(self, app: ASGIApp, token: str, protected: Iterable[str] = ("/api", "/mcp")) -> None:
        check_token(token)  # a blank token would let a blank cookie in
        self.app = app
        self._token = token.encode()
        self._protected = tuple(protected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(self._protected) and not self._allowed(scope):
            await _refuse(send, 401, "Unauthorized", "send the server's token as 'Authorization: Bearer TOKEN'",
                          [(b"www-authenticate", b'Bearer realm="vidagent"')])
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization", b"")
        if authorization[:7].lower() == b"bearer " and hmac.compare_digest(authorization[7:].strip(), self._token):
            return True
        cookie = headers.get(b"cookie")
        if cookie:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(cookie.decode("latin-1"))
            except Exception:  # noqa: BLE001 - a malformed cookie header is simply no token
                return False
            if COOKIE in jar and hmac.compare_digest(jar[COOKIE].value.encode(), self._token):
                return True
        return False


class LoopbackHostGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if not names_loopback(host):
                await _refuse(send, 400, "InvalidHost", f"this server answers only to a loopback host, not {host!r}")
                return
        await self.app(scope, receive, send)


def names_loopback(host: str) -> bool:
    """Whether a Host header names a loopback host: ``localhost`` or a loopback address (127.0.0.0/8, ``[::1]``),
    with a port or none; a header with anything more (``127.0.0.1:80@evil.example``) does not."""
    parts = _HOST.fullmatch(host.strip())
    if parts is None or (parts["port"] is not None and not 0 < int(parts["port"]) < 65536):
        return False
    return is_loopback(parts["v6"] or parts["name"].lower())


class SameOriginGuard:
    """A request that changes something (any method but GET, HEAD and OPTIONS) under ``protected``, and any
    request under ``closed``, is refused when a browser says it comes from another site: an ``Origin`` other
    than the server's own (``null`` included), or ``Sec-Fetch-Site: cross-site``. A web page the user visits
    could otherwise POST to the loopback server (a ``text/plain`` upload needs no CORS preflight), or call the
    MCP tools. Clients that are not browsers (curl, SDKs) send neither header and are not affected."""

    SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

    def __init__(self, app: ASGIApp, protected: Iterable[str] = ("/api",), closed: Iterable[str] = ("/mcp",)) -> None:
        self.app = app
        self._protected = tuple(protected)
        self._closed = tuple(closed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._guarded(scope["method"], scope["path"]):
            foreign = _foreign_origin(dict(scope.get("headers") or []))
            if foreign:
                body = error_body(cross_site(foreign))
                await _refuse(send, int(body["status"]), str(body["error"]), str(body["message"]))
                return
        await self.app(scope, receive, send)

    def _guarded(self, method: str, path: str) -> bool:
        return path.startswith(self._closed) or (method not in self.SAFE_METHODS and path.startswith(self._protected))


def same_site_only(request: Request) -> None:
    """A route's dependency: refuse a browser's request from another site (as ``SameOriginGuard`` does) to a
    GET route that makes files, which a page elsewhere could otherwise have the server make by naming its URL
    in an ``<img>`` or ``<video>``."""
    foreign = _foreign_origin(dict(request.scope.get("headers") or []))
    if foreign:
        raise cross_site(foreign)


def cross_site(foreign: str) -> CrossSiteError:
    """The refusal of a request from another site (``foreign`` says how it showed)."""
    return CrossSiteError(f"refused a request from another site ({foreign}): only this server's own page may "
                          "change its videos, make files or call its tools")


def add_guards(app: Starlette, *, token: str | None, host: str) -> None:
    """Guard ``app`` (the API and page with the MCP endpoint, or the MCP endpoint alone): with ``token``, /api and
    /mcp need it; without one on a loopback ``host``, every request must name a loopback host (DNS rebinding);
    either way a browser's request from another site may change nothing and reach no MCP tool."""
    app.add_middleware(SameOriginGuard)  # added first, so it runs after the token or host check
    if token:
        app.add_middleware(TokenGuard, token=token)
    elif is_loopback(host):
        app.add_middleware(LoopbackHostGuard)


def _foreign_origin(headers: dict[bytes, bytes]) -> str | None:
    """What makes a browser's request cross-site, or None for a same-origin one (or a non-browser client)."""
    host = headers.get(b"host", b"").decode("latin-1").lower()
    origin = headers.get(b"origin")
    if origin is not None:
        text = origin.decode("latin-1").strip().lower()
        if text.split("://", 1)[-1].rstrip("/") != host:
            return f"Origin {text}"
    if headers.get(b"sec-fetch-site", b"").lower() == b"cross-site":
        return "Sec-Fetch-Site: cross-site"
    return None


async def _refuse(send: Send, status: int, kind: str, message: str,
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": kind, "message": message, "status": status}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
