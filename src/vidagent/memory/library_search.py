"""Searching the whole library: the search index brought up to date, then ranked moments for a query.

``LibrarySearch`` is what every face uses (``vidagent search``, ``ask --library``, the HTTP route, the MCP tool):
it holds the library, the text embedder and the index, syncs the index with the library before a search (see
``search_index``), embeds the query and returns ``Moment``s.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta, timezone
from typing import Sequence

from vidagent.config import Settings
from vidagent.errors import VidagentError
from vidagent.memory.search_index import SearchFilters, SearchIndex, SyncReport
from vidagent.memory.search_moments import Moment, moments
from vidagent.memory.store import Library
from vidagent.perception.base import TextEmbedder
from vidagent.perception.suite import text_embedder

# A moment found by meaning alone (no word or category of the query in it) is listed only when its cosine with
# the query reaches MEANING_FLOOR and lies within MEANING_MARGIN of the best line's: E5's cosines sit near
# 0.80-0.82 for unrelated lines of these memories and 0.83-0.90 for lines about what the query names, and how high
# they all sit moves with the query (measured on the shared clips' memories: bench/search_quality.py --moments).
MEANING_FLOOR = 0.82
MEANING_MARGIN = 0.04
log = logging.getLogger(__name__)
LINES_PER_MOMENT = 4  # lines fetched per moment wanted: the lines of one moment are gathered into it
MAX_LIMIT = 1000
MAX_QUERY_CHARS = 2000
_AGO = re.compile(r"^(\d{1,5})([hdw])$")


class LibrarySearch:
    """Search over every memory of one library (see the module's description). Close it, or use it as a context
    manager, to close what it opened."""

    def __init__(self, library: Library, embedder: TextEmbedder, index: SearchIndex, *, owns: bool = False) -> None:
        self.library = library
        self.embedder = embedder
        self.index = index
        self._owns = owns

    @classmethod
    def open(cls, settings: Settings, library: Library | None = None,
             embedder: TextEmbedder | None = None) -> "LibrarySearch":
        """The search of ``settings``' library (``library``: that library, already open, stays the caller's;
        ``embedder``: the memories' text embedder, default the settings')."""
        owned = library is None
        library = library or Library(settings.library_path)
        return cls(library, embedder or text_embedder(settings), SearchIndex(settings.search_index_path), owns=owned)

    def sync(self, *, progress: bool = False, rebuild: bool = False) -> SyncReport:
        """Bring the index up to date with the library (``rebuild``: every video again)."""
        return self.index.sync(self.library, self.embedder, progress=progress, rebuild=rebuild)

    def search(self, query: str, filters: SearchFilters = SearchFilters(), *, limit: int = 10,
               progress: bool = False, min_similarity: float = MEANING_FLOOR) -> list[Moment]:
        """The ``limit`` best moments for ``query`` across the library (the index synced first); a moment found
        by meaning alone must reach ``min_similarity`` and lie within ``MEANING_MARGIN`` of the best line's cosine
        (``min_similarity`` 0: every moment, as ranked)."""
        query = " ".join(query.split())
        if not query:
            raise ValueError("the search query is empty")
        if len(query) > MAX_QUERY_CHARS:
            raise ValueError(f"the search query is longer than {MAX_QUERY_CHARS} characters")
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"the number of results must be between 1 and {MAX_LIMIT}")
        self.sync(progress=progress)
        vector = self.embedder.embed_queries([query])[0]
        lines = self.index.search(query, vector, filters, limit=limit * LINES_PER_MOMENT)
        floor = max(min_similarity, max((line.similarity for line in lines), default=0.0) - MEANING_MARGIN) \
            if min_similarity > 0 else 0.0
        return [moment for moment in moments(lines, limit) if moment.strong or moment.similarity >= floor]

    def close(self) -> None:
        self.index.close()
        if self._owns:
            self.library.close()

    def __enter__(self) -> "LibrarySearch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def since_time(text: str, now: datetime | None = None) -> str:
    """``--since`` as the ISO time the library writes: an ISO date or time, or an age (``12h``, ``3d``, ``2w``)."""
    text = text.strip()
    ago = _AGO.match(text)
    if ago:
        amount, unit = int(ago.group(1)), ago.group(2)
        delta = {"h": timedelta(hours=amount), "d": timedelta(days=amount), "w": timedelta(weeks=amount)}[unit]
        return ((now or datetime.now(timezone.utc)) - delta).isoformat(timespec="seconds")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--since {text!r}: give a date (2026-11-01), a time (2026-11-01T09:00) or an age "
                         f"(12h, 3d, 2w)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat(timespec="seconds")


def video_ids_for(library: Library, names: Sequence[str]) -> tuple[str, ...]:
    """The ids of the videos ``names`` point at: an id, a memory id, or a path (or file name) the library
    registered. A name that matches nothing is a ``ValueError`` naming it."""
    rows = library.rows("SELECT video_id, path FROM videos")
    found: list[str] = []
    for name in names:
        matches = [video_id for video_id, path in rows
                   if name in (video_id, path) or path.endswith(f"/{name}") or video_id.startswith(name) and len(name) >= 8]
        if not matches:
            raise ValueError(f"--video {name!r}: no video of the library has that id, path or file name")
        found += matches
    return tuple(dict.fromkeys(found))


def refresh_search_index(settings: Settings, *, progress: bool = False) -> SyncReport | None:
    """Take what indexing or an import just wrote into the search index now (the next search would otherwise do it
    first). The index is derived data: a failure here is logged and leaves the memories as they are (None)."""
    try:
        with LibrarySearch.open(settings) as search:
            return search.sync(progress=progress)
    except VidagentError as error:
        log.warning("the search index was not brought up to date (%s); the next search will try again", error)
        return None
