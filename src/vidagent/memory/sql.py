"""Read-only SQL over one video's memory, for SQL written by an LLM or typed by a user.

Safety comes from four independent layers:
- the database is opened read-only (``mode=ro``), so SQLite itself refuses writes;
- an authorizer allows only reading (SELECT, reads of columns, ordinary functions, CTEs): a
  statement that writes, creates, attaches a database, changes a pragma or loads an extension
  is refused with ``QueryRefusedError`` naming what it tried;
- a progress handler stops any statement after ``timeout_s``; one value may be at most
  ``MAX_VALUE_BYTES`` (SQLite's length limit: ``randomblob(1e9)`` is one instruction the handler cannot
  interrupt, so it is refused before it allocates), and a result at most ``MAX_RESULT_BYTES``;
- at most ``max_rows`` rows are fetched (the result says when there were more).

Every table is shadowed by a temporary view of the same name holding only this video's rows,
so queries need no ``video_id`` filter (``SELECT COUNT(*) FROM objects WHERE category='dog'``); the
library's own tables (``main.videos``, ``sqlite_master``...) are refused, so a query cannot leave its video.
"""

from __future__ import annotations

import math
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from vidagent.errors import MemoryStoreError, QueryRefusedError
from vidagent.memory.store import ALL_TABLES
from vidagent.memory.stored_video import is_memory_id

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_ROWS = 1000
MAX_VALUE_BYTES = 32 * 1024 * 1024  # the longest string or blob a statement may make or read
MAX_RESULT_BYTES = 64 * 1024 * 1024  # the most a result may hold, counted as rows are fetched
_PROGRESS_STEPS = 2000  # SQLite VM instructions between deadline checks

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_READ_ONLY_PRAGMAS = {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "foreign_key_list"}
_REFUSED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "sqlite_offset"}
_SCHEMA_TABLES = {"sqlite_master", "sqlite_temp_master", "sqlite_schema", "sqlite_temp_schema"}
_ACTION_NAMES = {
    getattr(sqlite3, f"SQLITE_{name.upper().replace(' ', '_')}"): name
    for name in ("create index", "create table", "create temp index", "create temp table", "create temp trigger",
                 "create temp view", "create trigger", "create view", "delete", "drop index", "drop table",
                 "drop temp index", "drop temp table", "drop temp trigger", "drop temp view", "drop trigger",
                 "drop view", "insert", "pragma", "transaction", "update", "attach", "detach", "alter table",
                 "reindex", "analyze", "create vtable", "drop vtable", "savepoint")
}
_VIDEO_ID = re.compile(r"^[0-9a-f]{8,128}$")  # a file's content hash; memories without a file have ids like egoschema:<q_uid>


@dataclass(frozen=True)
class QueryResult:
    """Rows of a read-only query; ``truncated`` when more than the row limit matched."""

    sql: str
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"columns": self.columns, "rows": [[_json_value(v) for v in row] for row in self.rows],
                "truncated": self.truncated}

    def to_text(self, max_rows: int = 20, max_chars: int = 1500) -> str:
        """A compact table for an LLM prompt or a terminal: floats rounded, blobs summarised."""
        if not self.columns:
            return "(the statement returned nothing)"
        if not self.rows:
            return f"{' | '.join(self.columns)}\n(no rows)"
        lines = [" | ".join(self.columns)]
        for row in self.rows[:max_rows]:
            line = " | ".join(_text_value(v) for v in row)
            if sum(len(x) + 1 for x in lines) + len(line) > max_chars:
                break
            lines.append(line)
        shown = len(lines) - 1
        remaining = len(self.rows) - shown
        if remaining > 0 or self.truncated:
            more = f"{remaining}+" if self.truncated else str(remaining)
            lines.append(f"({more} more rows not shown; {'at least ' if self.truncated else ''}"
                         f"{len(self.rows)} in total — add WHERE, GROUP BY or LIMIT)")
        return "\n".join(lines)


class ReadOnlyDatabase:
    """Runs read-only SQL against the SQLite database at ``path`` (the guards above); ``source``
    names what it holds, for the evidence a query's result becomes."""

    confined = False  # True: only the temporary views are readable, never the database's own tables

    def __init__(self, path: str | Path, *, source: str = "", timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_rows: int = DEFAULT_MAX_ROWS) -> None:
        path = Path(path)
        if not path.is_file():
            raise MemoryStoreError(f"no database at {path}")
        self.source = source
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self._refusal: str | None = None
        self._deadline = float("inf")
        try:
            self._conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
            self._prepare(self._conn)
        except sqlite3.DatabaseError as error:
            raise MemoryStoreError(f"cannot open {path} for reading: {error}") from error
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self._conn.set_authorizer(self._authorize)
        self._conn.set_progress_handler(self._check_deadline, _PROGRESS_STEPS)

    def _prepare(self, connection: sqlite3.Connection) -> None:
        """Set the connection up before the guards go on (a subclass's temporary views)."""

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, sql: str) -> QueryResult:
        """Execute one read-only statement; refusals, errors and timeouts raise one-line errors."""
        statement = sql.strip().rstrip(";").strip()
        if not statement:
            raise ValueError("the SQL statement is empty")
        self._refusal = None
        started = time.perf_counter()
        self._deadline = started + self.timeout_s
        try:
            cursor = self._conn.execute(statement)
            rows = self._fetch(cursor)
            columns = [d[0] for d in cursor.description] if cursor.description else []
        except sqlite3.DatabaseError as error:
            raise self._explain(error) from error
        except sqlite3.ProgrammingError as error:  # several statements at once, and the like
            raise MemoryStoreError(f"SQL error: {error}") from error
        finally:
            self._deadline = float("inf")
        return QueryResult(statement, columns, [tuple(r) for r in rows[: self.max_rows]],
                           len(rows) > self.max_rows, time.perf_counter() - started)

    def _fetch(self, cursor: sqlite3.Cursor) -> list[Any]:
        """Up to ``max_rows + 1`` rows (the extra one says there were more), at most ``MAX_RESULT_BYTES`` in all."""
        rows: list[Any] = []
        size = 0
        while len(rows) <= self.max_rows:
            row = cursor.fetchone()
            if row is None:
                break
            size += sum(len(value) if isinstance(value, (str, bytes)) else 8 for value in row)
            if size > MAX_RESULT_BYTES:
                raise MemoryStoreError(f"SQL result larger than {MAX_RESULT_BYTES // 2**20} MB: select fewer "
                                       f"or shorter values")
            rows.append(row)
        return rows

    # -- guards -----------------------------------------------------------------------------
    def _authorize(self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        if self.confined and action == sqlite3.SQLITE_READ and db not in (None, "temp") and source is None:
            self._refusal = (f"only this video's memory can be read (the statement reached {db}.{arg1}); "
                             f"name its tables without a schema")
            return sqlite3.SQLITE_DENY
        if action in _ALLOWED_ACTIONS:
            if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _REFUSED_FUNCTIONS:
                self._refusal = f"the function {arg2}() is not allowed"
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_ONLY_PRAGMAS:
            return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, f"action {action}")
        target = f" {arg1}" if arg1 else ""
        if (arg1 or "").lower() in _SCHEMA_TABLES:  # DROP/CREATE/ALTER reach SQLite's own schema table first
            self._refusal = "only reading is allowed (the statement tried to change the schema: create, drop or alter)"
        else:
            self._refusal = f"only reading is allowed (the statement tried: {what}{target})"
        return sqlite3.SQLITE_DENY

    def _check_deadline(self) -> int:
        return 1 if time.perf_counter() > self._deadline else 0

    def _explain(self, error: sqlite3.DatabaseError) -> Exception:
        if self._refusal:
            return QueryRefusedError(f"SQL refused: {self._refusal}")
        message = str(error)
        if "too big" in message:
            return MemoryStoreError(f"SQL value larger than {MAX_VALUE_BYTES // 2**20} MB: select shorter values")
        if "interrupted" in message:
            return MemoryStoreError(f"SQL stopped after {self.timeout_s:g} s: simplify the query or add LIMIT")
        if "readonly" in message or "read-only" in message or "cannot modify" in message:
            return QueryRefusedError("SQL refused: the memory is read-only")
        return MemoryStoreError(f"SQL error: {message}")


class ReadOnlyQueries(ReadOnlyDatabase):
    """Runs read-only SQL against one video's memory in the library at ``path`` (its temporary views only)."""

    confined = True

    def __init__(self, library_path: str | Path, video_id: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_rows: int = DEFAULT_MAX_ROWS) -> None:
        if not (_VIDEO_ID.match(video_id) or is_memory_id(video_id)):
            raise ValueError(f"not a video id: {video_id!r}")
        if not Path(library_path).is_file():
            raise MemoryStoreError(f"no library database at {library_path}: index a video first")
        self.video_id = video_id
        super().__init__(library_path, source=video_id, timeout_s=timeout_s, max_rows=max_rows)

    def _prepare(self, connection: sqlite3.Connection) -> None:
        for table in ALL_TABLES + ("videos", "stages"):
            connection.execute(
                f"CREATE TEMP VIEW {table} AS SELECT * FROM main.{table} WHERE video_id = '{self.video_id}'"
            )


def _text_value(value: Any) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return _non_finite(value)
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        if abs(value) >= 1e15:
            return f"{value:.6g}"
        return f"{value:.2f}".rstrip("0").rstrip(".")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _blob(value)
    if value is None:
        return "NULL"
    text = str(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _json_value(value: Any) -> Any:
    """A value ``json.dumps`` writes as standard JSON: no bare Infinity/NaN, no bytes."""
    if isinstance(value, float) and not math.isfinite(value):
        return _non_finite(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _blob(value)
    return value


def _non_finite(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _blob(value: bytes | bytearray | memoryview) -> str:
    return f"<{memoryview(value).nbytes}-byte blob>"
