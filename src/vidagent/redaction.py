"""Secrets kept out of what a person or a file sees: the credentials an address carries (``user:pass@``) and
the API keys a run was given. Ground: settings, the endpoints' errors and the names of models use it."""

from __future__ import annotations

import base64
import re
from typing import Iterable
from urllib.parse import unquote, urlsplit

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]*@")
HIDDEN = "***"


def redact_url(text: str) -> str:
    """``text`` with the credentials of every address in it hidden: ``http://user:pass@host`` -> ``http://***@host``."""
    return _USERINFO.sub(rf"\g<scheme>{HIDDEN}@", text)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with each of ``secrets`` (API keys) and every address's credentials hidden."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, HIDDEN)
    return redact_url(text)


def url_secrets(url: str) -> tuple[str, ...]:
    """What of ``url``'s credentials a server could echo back: the password, and the Basic authorization an
    HTTP client makes of ``user:password`` (its base64); none where the address carries no credentials."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return ()
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    found = [base64.b64encode(pair.encode()).decode("ascii")]
    if parts.password:
        found += [parts.password, unquote(parts.password)]
    return tuple(found)
