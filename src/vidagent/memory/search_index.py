"""The library search index: every line of every memory (``search_lines``), searchable at once by meaning, by
words and by object category, in one SQLite file beside the library.

Why a file of its own, and why SQLite with sqlite-vec: the index is derived data (rebuilt from the library at
any time), so it stays out of the library's schema, its packs and its read-only SQL; one SQLite file holds the
lines, their full-text index (FTS5) and their vectors (sqlite-vec's ``vec0`` tables), so a video's lines are
replaced in one transaction and a killed sync leaves the index as it was. Python's own ``sqlite3`` here cannot
load extensions, so the file is opened through ``apsw`` (its own SQLite, FTS5 and extension loading included).

Vectors are searched exactly by sqlite-vec (cosine over every line) while the index holds up to ``EXACT_LIMIT``
lines. Past that, each line's sign bits (one a dimension: 48 bytes for E5's 384) are scanned in memory (numpy's
XOR and popcount over the whole index: ~30 ms a million lines on these cores; sqlite-vec's own binary top-k grew
with k, 100 ms for 800 of 100,000) and the best ``COARSE_FACTOR`` x k candidates are re-ranked by their exact
cosine (from half-precision copies in a plain table: sqlite-vec's reads by rowid cost ~50 us a line). The codes are read once per process and again only after the index changed (a generation
number in ``meta``). ``bench/search_scale.py`` measures both paths.

Full text: a query word on more than ``COMMON_WORD_SHARE`` of the lines (and at least ``COMMON_WORD_MIN`` of
them) ranks nothing and costs a sort of every line it is on, so it is left out of the words ranking (the rarest
word is always kept): search engines' frequency stop words.

The index follows the library by signature: each video's built stages (name, configuration, time) are compared
with what the index took in, so a video indexed, imported (captions, packs, Ray), rebuilt or removed by any path
is brought up to date by ``sync``, which every search runs first (a few milliseconds when nothing changed).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
from tqdm import tqdm

from vidagent.errors import MemoryStoreError
from vidagent.memory.search_lines import LINE_KINDS, SearchLine, video_lines
from vidagent.memory.search_moments import SearchHit
from vidagent.memory.search_ranking import QueryWords, fuse_ranks, query_words
from vidagent.memory.store import BUILT_STAGE, Library
from vidagent.perception.base import TextEmbedder

log = logging.getLogger(__name__)

INDEX_VERSION = 4
EXACT_LIMIT = 60_000  # lines searched exactly by vector; past this, binary-quantised candidates are re-ranked
COARSE_FACTOR = 5  # candidates the binary scan hands to the exact re-ranking, per result wanted
COMMON_WORD_SHARE = 0.02
COMMON_WORD_MIN = 2_000
RANK_WEIGHTS = {"meaning": 1.0, "words": 0.5, "category": 1.0}
"""Each ranking's weight in the fusion: the words' half of the others' (on NExT-QA's 547 development questions, each
a query over all 570 imported memories: R@1/@5 of the question's own video 0.227/0.420 at 0.5 against 0.218/0.389
at 1; 0.219/0.426 at 0.25: bench/search_quality.py)."""
RANKED_PER_LIST = 200  # how deep each ranking (vectors, words, categories) reaches before fusion
BUSY_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS videos (
    video_key  INTEGER PRIMARY KEY,
    video_id   TEXT NOT NULL UNIQUE,
    path       TEXT NOT NULL,
    added_at   TEXT NOT NULL,
    duration_s REAL NOT NULL,
    signature  TEXT NOT NULL,
    line_count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS lines (
    line_id   INTEGER PRIMARY KEY,
    video_key INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    start_s   REAL NOT NULL,
    end_s     REAL NOT NULL,
    text      TEXT NOT NULL,
    category  TEXT,
    detail    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS lines_by_video ON lines(video_key);
CREATE TABLE IF NOT EXISTS line_codes (line_id INTEGER PRIMARY KEY, code BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS line_halves (line_id INTEGER PRIMARY KEY, vector BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS lines_by_category_kind ON lines(category, kind) WHERE category IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS line_words USING fts5(text, tokenize = 'porter unicode61');
"""


@dataclass(frozen=True)
class SearchFilters:
    """What a search may return: only these videos (ids), kinds of line, object categories, and videos added to
    the library at or after ``since`` (an ISO date or time). Empty: no restriction."""

    videos: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    since: str = ""

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(LINE_KINDS)
        if unknown:
            raise ValueError(f"unknown kind {sorted(unknown)[0]!r}: choose from {', '.join(LINE_KINDS)}")

    def sql(self) -> tuple[str, list[object]]:
        """A condition on ``lines l JOIN videos v`` and its parameters."""
        parts: list[str] = []
        params: list[object] = []
        for column, values in (("v.video_id", self.videos), ("l.kind", self.kinds), ("l.category", self.categories)):
            if values:  # one parameter however many values (SQLite allows 32,766 in a statement)
                parts.append(f"{column} IN (SELECT value FROM json_each(?))")
                params.append(json.dumps(list(values)))
        if self.since:
            parts.append("v.added_at >= ?")
            params.append(self.since)
        return (" AND ".join(parts) or "1"), params

    @property
    def empty(self) -> bool:
        return not (self.videos or self.kinds or self.categories or self.since)


@dataclass
class SyncReport:
    """What a ``sync`` did: videos whose lines were (re)written, removed, and lines written."""

    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    lines: int = 0
    seconds: float = 0.0


class SearchIndex:
    """The search index file at ``path`` (created on first use). Safe to share between threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            import apsw
            import sqlite_vec
        except ImportError as error:  # pragma: no cover - both are dependencies of vidagent
            raise MemoryStoreError(f"the library search needs apsw and sqlite-vec ({error}): "
                                   f"pip install apsw sqlite-vec") from error
        self._code_cache: tuple[str, np.ndarray, np.ndarray] | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = apsw.Connection(str(self.path))
            self._conn.set_busy_timeout(BUSY_MS)
            self._conn.enable_load_extension(True)
            self._conn.load_extension(sqlite_vec.loadable_path())
            self._conn.enable_load_extension(False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(_SCHEMA)
        except apsw.Error as error:
            raise MemoryStoreError(f"cannot open the search index {self.path}: {error} (it is made from the library: "
                                   f"`vidagent search --rebuild` makes it anew)") from error

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @staticmethod
    def remove(path: str | Path) -> None:
        """Delete the index file at ``path`` and its journal (it is derived data: the next sync makes it anew)."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    def __enter__(self) -> "SearchIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the index holds ----------------------------------------------------------------
    def _meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def line_count(self) -> int:
        with self._lock:
            return self._line_total()

    def _line_total(self) -> int:
        return int(self._conn.execute("SELECT COALESCE(SUM(line_count), 0) FROM videos").fetchone()[0])

    def video_count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM videos").fetchone()[0])

    def _ensure_vectors(self, embedder_name: str, dim: int) -> None:
        """Make the vector tables for ``dim``-wide vectors of ``embedder_name``; an index made with another embedder
        is emptied first (its vectors would not compare with the queries')."""
        made_for = self._meta("embedder")
        wanted = json.dumps({"name": embedder_name, "dim": dim, "version": INDEX_VERSION})
        if made_for == wanted:
            return
        if made_for is not None:
            log.info("%s: made with another text embedder or version; rebuilding it", self.path)
        with self._conn:  # everything made anew: the tables of an older version may differ too
            for table in ("line_vectors", "line_bits", "line_words", "line_codes", "line_halves", "lines", "videos"):
                self._conn.execute(f"DROP TABLE IF EXISTS {table}")
            self._conn.execute(_SCHEMA)
            self._conn.execute(f"CREATE VIRTUAL TABLE line_vectors USING vec0(embedding float[{dim}] "
                               f"distance_metric=cosine)")
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('embedder', ?)", (wanted,))

    # -- keeping up with the library ------------------------------------------------------------
    def sync(self, library: Library, embedder: TextEmbedder, *, progress: bool = False,
             rebuild: bool = False) -> SyncReport:
        """Bring the index up to date with ``library``: (re)write the lines of every video whose built stages
        changed since the index took it in, drop videos the library no longer has. ``rebuild``: every video."""
        import time

        started = time.perf_counter()
        report = SyncReport()
        with self._lock:
            self._ensure_vectors(embedder.name, int(embedder.dim))
            if rebuild:
                with self._conn:
                    self._conn.execute("DELETE FROM lines; DELETE FROM line_words; DELETE FROM line_vectors; "
                                       "DELETE FROM line_codes; DELETE FROM line_halves; DELETE FROM videos")
                    self._changed()
            wanted = _library_signatures(library)
            held = {video_id: (signature, path) for video_id, signature, path in
                    self._conn.execute("SELECT video_id, signature, path FROM videos")}
            for video_id in sorted(set(held) - set(wanted)):
                self._remove(video_id)
                report.removed.append(video_id)
            stale = [video_id for video_id, row in wanted.items() if held.get(video_id, ("",))[0] != row["signature"]]
            for video_id, row in wanted.items():
                if video_id not in stale and held[video_id][1] != row["path"]:  # moved: where it is now
                    with self._conn:
                        self._conn.execute("UPDATE videos SET path = ? WHERE video_id = ?", (row["path"], video_id))
            for video_id in tqdm(stale, desc="search index", unit="video", disable=not progress or not stale,
                                 dynamic_ncols=True):
                report.lines += self._take_in(library, embedder, wanted[video_id])
                report.updated.append(video_id)
        report.seconds = time.perf_counter() - started
        if report.updated or report.removed:
            log.info("search index: %d videos updated (%d lines), %d removed in %.1f s", len(report.updated),
                     report.lines, len(report.removed), report.seconds)
        return report

    def _remove(self, video_id: str) -> None:
        with self._conn:
            row = self._conn.execute("SELECT video_key FROM videos WHERE video_id = ?", (video_id,)).fetchone()
            if row is None:
                return
            key = row[0]
            for table in ("line_words", "line_vectors", "line_codes", "line_halves"):
                self._conn.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT line_id FROM lines WHERE video_key = ?)",
                                   (key,))
            self._conn.execute("DELETE FROM lines WHERE video_key = ?", (key,))
            self._conn.execute("DELETE FROM videos WHERE video_key = ?", (key,))
            self._changed()

    def _take_in(self, library: Library, embedder: TextEmbedder, video: dict[str, object]) -> int:
        """Write one video's lines (replacing what the index held of it) in one transaction."""
        video_id = str(video["video_id"])
        lines = video_lines(library, video_id, embedder.name)
        vectors = _line_vectors(lines, embedder)
        self.add_lines(video_id, str(video["path"]), str(video["added_at"]), float(video["duration_s"]),  # type: ignore[arg-type]
                       str(video["signature"]), lines, vectors)
        return len(lines)

    def add_lines(self, video_id: str, path: str, added_at: str, duration_s: float, signature: str,
                  lines: Sequence[SearchLine], vectors: np.ndarray) -> None:
        """Replace what the index holds of ``video_id`` with ``lines`` and their unit ``vectors`` (one row each), in
        one transaction (the scale benchmark fills an index this way too)."""
        if len(lines) != len(vectors):
            raise ValueError(f"{len(lines)} lines but {len(vectors)} vectors")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        with self._lock:
            self._ensure_vectors_for(vectors)
            with self._conn:  # one transaction (apsw nests the removal's as a savepoint)
                self._remove(video_id)
                self._conn.execute("INSERT INTO videos (video_id, path, added_at, duration_s, signature, line_count) "
                                   "VALUES (?,?,?,?,?,?)", (video_id, path, added_at, duration_s, signature, len(lines)))
                key = self._conn.last_insert_rowid()
                first = int(self._conn.execute("SELECT COALESCE(MAX(line_id), 0) + 1 FROM lines").fetchone()[0])
                ids = range(first, first + len(lines))
                self._conn.executemany(
                    "INSERT INTO lines VALUES (?,?,?,?,?,?,?,?)",
                    [(line_id, key, line.kind, line.start_s, line.end_s, line.text, line.category, line.detail())
                     for line_id, line in zip(ids, lines)])
                self._conn.executemany("INSERT INTO line_words (rowid, text) VALUES (?, ?)",
                                       [(line_id, line.text) for line_id, line in zip(ids, lines)])
                self._conn.executemany("INSERT INTO line_vectors (rowid, embedding) VALUES (?, ?)",
                                       [(line_id, vector.tobytes()) for line_id, vector in zip(ids, vectors)])
                codes = np.packbits(vectors > 0, axis=1)
                self._conn.executemany("INSERT INTO line_codes VALUES (?, ?)",
                                       [(line_id, code.tobytes()) for line_id, code in zip(ids, codes)])
                self._conn.executemany("INSERT INTO line_halves VALUES (?, ?)",
                                       [(line_id, vector.astype(np.float16).tobytes())
                                        for line_id, vector in zip(ids, vectors)])
                self._changed()

    def _ensure_vectors_for(self, vectors: np.ndarray) -> None:
        if self._meta("embedder") is None:  # filled without a sync (the benchmark): vectors of this width
            self._ensure_vectors("vectors given", int(vectors.shape[1]) if vectors.ndim == 2 else 0)

    # -- searching -------------------------------------------------------------------------------
    def search(self, query: str, query_vector: np.ndarray | None, filters: SearchFilters = SearchFilters(), *,
               limit: int = 10) -> list[SearchHit]:
        """The ``limit`` best moments for ``query``: the lines ranked by meaning (cosine with ``query_vector``),
        by words (FTS5's BM25 over the query's content words) and by an exact category match (an object category
        the query names), fused by reciprocal rank (``search_ranking.fuse_ranks``)."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        words = query_words(query)
        with self._lock:
            if self._meta("embedder") is None:
                return []
            depth = max(RANKED_PER_LIST, limit * 5)
            by_meaning = self._by_meaning(query_vector, filters, depth) if query_vector is not None else []
            by_words = self._by_words(words, filters, depth)
            by_category = self._by_category(words.categories_among(self.categories()), filters, depth)
            fused = fuse_ranks({"meaning": [line_id for line_id, _ in by_meaning], "words": by_words,
                                "category": by_category}, RANK_WEIGHTS)
            similarity = dict(by_meaning)
            return self._hits(fused[:limit], similarity)

    def _filtered_ids_sql(self, filters: SearchFilters) -> tuple[str, list[object]]:
        condition, params = filters.sql()
        return f"SELECT l.line_id FROM lines l JOIN videos v ON v.video_key = l.video_key WHERE {condition}", params

    def _by_meaning(self, vector: np.ndarray, filters: SearchFilters, depth: int) -> list[tuple[int, float]]:
        """(line id, cosine) of the ``depth`` lines nearest ``vector`` that pass ``filters``, nearest first."""
        blob = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1).tobytes()
        total = self._line_total()
        if not filters.empty:
            ids_sql, params = self._filtered_ids_sql(filters)
            if total <= EXACT_LIMIT or self._count(ids_sql, params) <= EXACT_LIMIT:
                rows = self._conn.execute(
                    f"SELECT rowid, vec_distance_cosine(embedding, ?) AS d FROM line_vectors WHERE rowid IN ({ids_sql}) "
                    f"ORDER BY d LIMIT ?", (blob, *params, depth)).fetchall()
                return [(int(r), 1.0 - float(d)) for r, d in rows]
            allowed = np.fromiter((row[0] for row in self._conn.execute(ids_sql, params)), np.int64)
            return self._rerank(blob, self._coarse(blob, depth * COARSE_FACTOR, among=allowed), depth)
        if total <= EXACT_LIMIT:
            rows = self._conn.execute("SELECT rowid, distance FROM line_vectors WHERE embedding MATCH ? AND k = ? "
                                      "ORDER BY distance", (blob, depth)).fetchall()
            return [(int(r), 1.0 - float(d)) for r, d in rows]
        return self._rerank(blob, self._coarse(blob, depth * COARSE_FACTOR), depth)

    def _count(self, ids_sql: str, params: list[object]) -> int:
        return int(self._conn.execute(f"SELECT COUNT(*) FROM ({ids_sql})", params).fetchone()[0])

    def _coarse(self, blob: bytes, k: int, among: np.ndarray | None = None) -> list[int]:
        """The ``k`` lines nearest by Hamming distance of their sign bits (see the module's description); ``among``:
        only these line ids."""
        ids, codes = self._codes()
        if among is not None:
            keep = np.isin(ids, among, assume_unique=True)
            ids, codes = ids[keep], codes[keep]
        if not len(ids):
            return []
        query = np.packbits(np.frombuffer(blob, np.float32) > 0)
        query = np.pad(query, (0, codes.shape[1] * 8 - len(query))).view(np.uint64)
        distances = np.bitwise_count(codes ^ query).sum(axis=1, dtype=np.uint32)
        k = min(k, len(ids))
        nearest = np.argpartition(distances, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
        return [int(i) for i in ids[nearest[np.argsort(distances[nearest], kind="stable")]]]

    def _codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Every line's id and sign bits (as uint64 words), read once per change of the index."""
        generation = self._meta("generation") or "0"
        if self._code_cache is None or self._code_cache[0] != generation:
            rows = self._conn.execute("SELECT line_id, code FROM line_codes ORDER BY line_id").fetchall()
            ids = np.fromiter((row[0] for row in rows), np.int64, len(rows))
            width = len(rows[0][1]) if rows else 8
            padded = -(-width // 8) * 8
            raw = np.zeros((len(rows), padded), np.uint8)
            if rows:
                raw[:, :width] = np.frombuffer(b"".join(row[1] for row in rows), np.uint8).reshape(len(rows), width)
            self._code_cache = (generation, ids, raw.view(np.uint64))
        return self._code_cache[1], self._code_cache[2]

    def _changed(self) -> None:
        """Mark the index changed (in the writing transaction): the code cache of every process reads it again."""
        self._conn.execute("INSERT INTO meta VALUES ('generation', '1') ON CONFLICT(key) DO UPDATE SET "
                           "value = CAST(value AS INTEGER) + 1")

    def _rerank(self, blob: bytes, candidates: list[int], depth: int) -> list[tuple[int, float]]:
        """``candidates`` ordered by their exact cosine with the query, the best ``depth`` (read from the half-precision
        copies in a plain table: sqlite-vec's own reads by rowid cost ~50 us a line)."""
        if not candidates:
            return []
        rows = self._conn.execute(f"SELECT line_id, vector FROM line_halves WHERE line_id IN "
                                  f"({','.join('?' * len(candidates))})", candidates).fetchall()
        if not rows:
            return []
        ids = np.fromiter((row[0] for row in rows), np.int64, len(rows))
        matrix = np.frombuffer(b"".join(row[1] for row in rows), np.float16).reshape(len(rows), -1)
        query = np.frombuffer(blob, np.float32)
        cosines = matrix.astype(np.float32) @ query / max(float(np.linalg.norm(query)), 1e-12)
        best = np.argsort(-cosines, kind="stable")[:depth]
        return [(int(ids[i]), float(cosines[i])) for i in best]

    def _by_words(self, words: QueryWords, filters: SearchFilters, depth: int) -> list[int]:
        terms = self._telling_terms(words.terms)
        if not terms:
            return []
        match = " OR ".join(f'"{term}"' for term in terms)
        condition, params = filters.sql()
        rows = self._conn.execute(
            f"""SELECT w.rowid FROM line_words w JOIN lines l ON l.line_id = w.rowid
                JOIN videos v ON v.video_key = l.video_key
                WHERE line_words MATCH ? AND {condition} ORDER BY bm25(line_words) LIMIT ?""",
            (match, *params, depth)).fetchall()
        return [int(row[0]) for row in rows]

    def _telling_terms(self, terms: Sequence[str]) -> list[str]:
        """``terms`` without those on too many lines to tell any apart (the rarest one always kept)."""
        if not terms:
            return []
        total = self._line_total()
        common = max(COMMON_WORD_MIN, COMMON_WORD_SHARE * total)
        common = int(common)
        counts = {term: int(self._conn.execute(  # counted no further than "too many": bounded work
            "SELECT COUNT(*) FROM (SELECT rowid FROM line_words WHERE line_words MATCH ? LIMIT ?)",
            (f'"{term}"', common + 1)).fetchone()[0]) for term in terms}
        kept = [term for term in terms if counts[term] <= common]
        return kept or [min(terms, key=lambda term: counts[term])]

    def _by_category(self, categories: Sequence[str], filters: SearchFilters, depth: int) -> list[int]:
        if not categories:
            return []
        condition, params = filters.sql()
        marks = ",".join("?" * len(categories))
        found: list[int] = []
        for kinds in ("= 'object'", "!= 'object'"):  # objects first; two limited reads instead of a sort
            found += [int(row[0]) for row in self._conn.execute(
                f"""SELECT l.line_id FROM lines l JOIN videos v ON v.video_key = l.video_key
                    WHERE l.category IN ({marks}) AND l.kind {kinds} AND {condition} LIMIT ?""",
                (*categories, *params, depth - len(found)))]
            if len(found) >= depth:
                break
        return found

    def _hits(self, fused: list[tuple[int, float, tuple[str, ...]]], similarity: dict[int, float]) -> list[SearchHit]:
        if not fused:
            return []
        ids = [line_id for line_id, _, _ in fused]
        rows = {row[0]: row[1:] for row in self._conn.execute(
            f"""SELECT l.line_id, v.video_id, v.path, l.kind, l.start_s, l.end_s, l.text, l.category, l.detail
                FROM lines l JOIN videos v ON v.video_key = l.video_key
                WHERE l.line_id IN ({','.join('?' * len(ids))})""", ids)}
        hits = []
        for line_id, score, matched_by in fused:
            video_id, path, kind, start_s, end_s, text, category, detail = rows[line_id]
            spans = tuple((float(a), float(b)) for a, b in json.loads(detail).get("spans", []))
            hits.append(SearchHit(video_id, path, kind, float(start_s), float(end_s), text, category, spans, score,
                                  similarity.get(line_id, 0.0), matched_by))
        return hits

    def categories(self) -> list[str]:
        """The object categories the index holds."""
        with self._lock:
            return [row[0] for row in self._conn.execute(
                "SELECT DISTINCT category FROM lines WHERE category IS NOT NULL ORDER BY category")]


def _library_signatures(library: Library) -> dict[str, dict[str, object]]:
    """Each video of ``library`` with a built stage: its id, path, when added, duration and a signature of its
    built stages (what changes when any of them is rebuilt)."""
    rows = library.rows(
        f"""SELECT v.video_id, v.path, v.added_at, v.duration_s,
                   (SELECT group_concat(stage || '=' || config_key || '@' || built_at, ',') FROM
                       (SELECT stage, config_key, built_at FROM stages s
                        WHERE s.video_id = v.video_id AND {BUILT_STAGE} ORDER BY stage))
            FROM videos v""")
    return {video_id: {"video_id": video_id, "path": path, "added_at": added_at, "duration_s": duration_s,
                       "signature": signature} for video_id, path, added_at, duration_s, signature in rows if signature}


def _line_vectors(lines: Sequence[SearchLine], embedder: TextEmbedder) -> np.ndarray:
    """A unit vector per line: the stored one where the memory has it, else the embedder's (each distinct text
    embedded once)."""
    dim = int(embedder.dim)
    out = np.zeros((len(lines), dim), np.float32)
    missing = sorted({line.text for line in lines if line.stored_vector is None or len(line.stored_vector) != dim})
    fresh = dict(zip(missing, embedder.embed_passages(missing))) if missing else {}
    for row, line in enumerate(lines):
        vector = line.stored_vector if line.stored_vector is not None and len(line.stored_vector) == dim \
            else fresh[line.text]
        out[row] = vector
    return out
