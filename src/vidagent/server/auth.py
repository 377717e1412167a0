"""Who may talk to the server (plain ASGI middleware, for the HTTP API and the MCP endpoint alike).

``TokenGuard``: with a token,
a request to a protected path needs ``Authorization: Bearer TOKEN``; the web page, which cannot put
headers on ``<video>`` and ``<img>`` requests, may send the token as the ``vidagent_token`` cookie
(set by the page itself, SameSite=Strict) instead.

``LoopbackHostGuard``: without a token (loopback only), a request must name a loopback host, so a web
page elsewhere cannot reach the server through DNS rebinding.

``SameOriginGuard``: a browser request from another site may not change anything under ``/api``
(cross-site request forgery: an upload needs no CORS preflight).
"""

from __future__ import annotations

import hmac
import json
from http.cookies import SimpleCookie
from typing import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "vidagent_token"


class TokenGuard:
    def __init__(self, app: ASGIApp, token: str, protected: Iterable[str] = ("/api", "/mcp")) -> None:
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
    HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in self.HOSTS:
                await _refuse(send, 400, "InvalidHost", f"this server answers only to a loopback host, not {host!r}")
                return
        await self.app(scope, receive, send)


class SameOriginGuard:
    """A request that changes something (any method but GET, HEAD and OPTIONS) under ``protected`` is
    refused when a browser says it comes from another site: an ``Origin`` other than the server's own
    (``null`` included), or ``Sec-Fetch-Site: cross-site``. A web page the user visits could otherwise
    POST to the loopback server (a ``text/plain`` upload needs no CORS preflight). Clients that are
    not browsers (curl, SDKs) send neither header and are not affected."""

    SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

    def __init__(self, app: ASGIApp, protected: Iterable[str] = ("/api",)) -> None:
        self.app = app
        self._protected = tuple(protected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in self.SAFE_METHODS \
                and scope["path"].startswith(self._protected):
            foreign = _foreign_origin(dict(scope.get("headers") or []))
            if foreign:
                await _refuse(send, 403, "CrossSiteRequest",
                              f"refused a request from another site ({foreign}): only this server's own page "
                              f"may change its videos")
                return
        await self.app(scope, receive, send)


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
