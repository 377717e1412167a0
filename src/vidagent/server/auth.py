"""The bearer token guard, for the HTTP API and the MCP endpoint alike (plain ASGI middleware).

A request to a protected path needs ``Authorization: Bearer TOKEN``; the web page, which cannot put
headers on ``<video>`` and ``<img>`` requests, may send the token as the ``vidagent_token`` cookie
(set by the page itself, SameSite=Strict) instead.
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
            body = json.dumps({"error": "Unauthorized", "status": 401,
                               "message": "send the server's token as 'Authorization: Bearer TOKEN'"}).encode()
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                    (b"www-authenticate", b'Bearer realm="vidagent"')]})
            await send({"type": "http.response.body", "body": body})
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
