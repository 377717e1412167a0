"""Web knowledge: a search engine behind a SearxNG-style JSON API.

``GET <endpoint>/search?q=...&format=json`` answers ``{"results": [{"title", "url", "content"}, ...]}``
(SearxNG's own format; a self-hosted SearxNG with the JSON format enabled serves it). The endpoint is
set by the user (``VIDAGENT_WEB_SEARCH``); without one there is no web search. What comes back is text
from strangers: the tools quote it as untrusted, the way they quote text read in a video.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from vidagent.errors import KnowledgeError


@dataclass(frozen=True)
class WebResult:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class WebSearch:
    """Searches through ``endpoint`` (the service's address, with or without its ``/search`` path)."""

    endpoint: str
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        parts = urlsplit(self.endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise KnowledgeError(f"web search endpoint {self.endpoint!r} is not an http(s) address")

    @property
    def url(self) -> str:
        base = self.endpoint.rstrip("/")
        return base if base.endswith("/search") else f"{base}/search"

    def search(self, query: str, count: int = 5) -> list[WebResult]:
        """The first ``count`` results for ``query``; a service that fails or answers nonsense is an error."""
        try:
            response = httpx.get(self.url, params={"q": query, "format": "json"}, timeout=self.timeout_s)
            response.raise_for_status()
            payload = response.json()
        except httpx.TimeoutException as error:
            raise KnowledgeError(f"web search at {self.url} did not answer within {self.timeout_s:g} s") from error
        except httpx.HTTPStatusError as error:
            raise KnowledgeError(f"web search at {self.url} answered {error.response.status_code}") from error
        except httpx.HTTPError as error:
            raise KnowledgeError(f"web search at {self.url} cannot be reached: {error}") from error
        except ValueError as error:
            raise KnowledgeError(f"web search at {self.url} did not answer JSON") from error
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise KnowledgeError(f"web search at {self.url} answered without a list of results")
        found = []
        for item in results:
            if not isinstance(item, dict):
                continue
            snippet = " ".join(str(item.get("content") or "").split())
            title = " ".join(str(item.get("title") or "").split())
            if snippet or title:
                found.append(WebResult(title, str(item.get("url") or ""), snippet))
            if len(found) == count:
                break
        return found
