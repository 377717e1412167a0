"""Who may talk to the server (plain ASGI middleware, for the HTTP API and the MCP endpoint alike).

``TokenGuard``: with a token,
a request to a protected path needs ``Authorization: Bearer TOKEN``; the web page, which cannot put
headers on ``<video>`` and ``<img>`` requests, may send the token as the ``vidagent_token`` cookie
(set by the page itself, SameSite=Strict) instead.

``LoopbackHostGuard``: without a token (loopback only), a request must name a loopback host, so a web
page elsewhere cannot reach the server through DNS rebinding.
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


async def _refuse(send: Send, status: int, kind: str, message: str,
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": kind, "message": message, "status": status}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
