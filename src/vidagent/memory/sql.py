"""Read-only SQL over one video's memory, for SQL written by an LLM or typed by a user.

Safety comes from independent layers:
- a video's memory is queried in a private in-memory database holding copies of that video's rows only
  (``ReadOnlyQueries``): no other video, library table or library schema exists there for any statement
  to reach, whatever its form (a schema name, a common table expression, a pragma); a user's own
  database (``ReadOnlyDatabase``) is opened read-only (``mode=ro``), so SQLite itself refuses writes;
- an authorizer allows only reading (SELECT, reads of columns, ordinary functions, CTEs): a
  statement that writes, creates, attaches a database, changes a pragma or loads an extension
  is refused with ``QueryRefusedError`` naming what it tried;
- a progress handler stops any statement after ``timeout_s``, checked every few instructions; one value
  may be at most ``MAX_VALUE_BYTES`` (SQLite's length limit: ``randomblob(1e9)`` is one instruction the
  handler cannot interrupt, so it is refused before it allocates; ``printf``'s widths likewise), and a
  result at most ``MAX_RESULT_BYTES``;
- at most ``max_rows`` rows are fetched (the result says when there were more).

The private tables keep their names, so queries need no ``video_id`` filter
(``SELECT COUNT(*) FROM objects WHERE category='dog'``).
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Self

from vidagent.errors import MemoryStoreError, QueryRefusedError
from vidagent.memory.store import ALL_TABLES, BUILD_ONLY_TABLES
from vidagent.memory.stored_video import is_memory_id

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_ROWS = 1000
MAX_VALUE_BYTES = 8 * 1024 * 1024  # the longest string or blob a statement may make or read
_STORED_VALUE_BYTES = 1_000_000_000  # SQLite's own most: what a library may hold, copied as it is
MAX_RESULT_BYTES = 64 * 1024 * 1024  # the most a result may hold, counted as rows are fetched
_PROGRESS_STEPS = 100  # SQLite VM instructions between deadline checks (one may make a value of MAX_VALUE_BYTES)

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
_OPENING_OPCODES = {"OpenRead", "ReopenIdx"}  # EXPLAIN's opcodes that open a table or index (P2: its root page)
_EXPLAINED = re.compile(r"^\s*EXPLAIN(\s+QUERY\s+PLAN)?\s+", re.IGNORECASE)
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
        self._running = threading.Lock()  # one statement at a time (and a private copy filled beside none)
        try:
            self._conn = self._open(path)
        except sqlite3.DatabaseError as error:
            raise MemoryStoreError(f"cannot open {path} for reading: {error}") from error
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self._formatter = sqlite3.connect(":memory:", check_same_thread=False)  # SQLite's printf, for _printf
        self._formatter.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self._oversized = False
        for name in ("printf", "format"):
            self._conn.create_function(name, -1, self._printf, deterministic=True)
        self._conn.set_authorizer(self._authorize)
        self._conn.set_progress_handler(self._check_deadline, _PROGRESS_STEPS)

    def _open(self, path: Path) -> sqlite3.Connection:
        """The connection the statements run on (before the guards go on): the database itself, read-only."""
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)

    def _ready(self, statement: str) -> None:
        """Make what ``statement`` reads available (a subclass's private copy), before it runs."""

    def close(self) -> None:
        self._conn.close()
        self._formatter.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, sql: str) -> QueryResult:
        """Execute one read-only statement; refusals, errors and timeouts raise one-line errors."""
        with self._running:
            return self._run(sql)

    def _run(self, sql: str) -> QueryResult:
        statement = sql.strip().rstrip(";").strip()
        if not statement:
            raise ValueError("the SQL statement is empty")
        self._refusal = None
        self._oversized = False
        started = time.perf_counter()
        self._deadline = started + self.timeout_s
        try:
            self._ready(statement)
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

    def _printf(self, template: Any = None, *values: Any) -> Any:
        """SQLite's ``printf`` (alias ``format``), its widths and precisions first bounded: SQLite fills one
        character at a time past the length limit, in one instruction no deadline check interrupts
        (``printf('%.*c', 2000000000, 'x')`` took 12 s)."""
        if template is None:
            return None
        if any(size > MAX_VALUE_BYTES for size in _printf_sizes(str(template), values)):
            self._oversized = True
            raise ValueError("printf width or precision too big")
        marks = ", ".join("?" * (1 + len(values)))
        return self._formatter.execute(f"SELECT printf({marks})", (template, *values)).fetchone()[0]

    def _check_deadline(self) -> int:
        return 1 if time.perf_counter() > self._deadline else 0

    def _explain(self, error: sqlite3.DatabaseError) -> Exception:
        if self._refusal:
            return QueryRefusedError(f"SQL refused: {self._refusal}")
        message = str(error)
        if "too big" in message or self._oversized:
            return MemoryStoreError(f"SQL value larger than {MAX_VALUE_BYTES // 2**20} MB: select shorter values")
        if "interrupted" in message:
            return MemoryStoreError(f"SQL stopped after {self.timeout_s:g} s: simplify the query or add LIMIT")
        if "readonly" in message or "read-only" in message or "cannot modify" in message:
            return QueryRefusedError("SQL refused: the memory is read-only")
        return MemoryStoreError(f"SQL error: {message}")


class ReadOnlyQueries(ReadOnlyDatabase):
    """Runs read-only SQL against one video's memory in the library at ``path``.

    Scoped by construction: the statements run on a private in-memory database holding copies of this
    video's rows only, so no other video, no library table and no schema of the library is reachable by
    any statement (a common table expression, a schema name or a pragma included). Its tables are created
    empty when it opens and each is filled the first time a statement reads it (``EXPLAIN`` names the
    tables a statement opens), while no statement runs: a question that reads two tables copies two."""

    def __init__(self, library_path: str | Path, video_id: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_rows: int = DEFAULT_MAX_ROWS) -> None:
        if not (_VIDEO_ID.match(video_id) or is_memory_id(video_id)):
            raise ValueError(f"not a video id: {video_id!r}")
        if not Path(library_path).is_file():
            raise MemoryStoreError(f"no library database at {library_path}: index a video first")
        self.video_id = video_id
        self._library_uri = f"{Path(library_path).resolve().as_uri()}?mode=ro"
        self._tables_by_page: dict[int, str] = {}
        self._unfilled: set[str] = set()
        super().__init__(library_path, source=video_id, timeout_s=timeout_s, max_rows=max_rows)

    def _open(self, path: Path) -> sqlite3.Connection:
        connection = sqlite3.connect(":memory:", uri=True, isolation_level=None, check_same_thread=False)
        try:
            with self._library_attached(connection):
                wanted = tuple(t for t in ALL_TABLES if t not in BUILD_ONLY_TABLES) + ("videos", "stages")
                schema = connection.execute(
                    "SELECT type, tbl_name, sql FROM library.sqlite_master WHERE type IN ('table', 'index') "
                    "AND sql IS NOT NULL ORDER BY type = 'index'").fetchall()
                for kind, table, sql in schema:
                    if table in wanted:
                        connection.execute(sql)  # the library's own CREATE statement, into the private database
                        if kind == "table":
                            self._unfilled.add(table)
            self._tables_by_page = dict(connection.execute(
                "SELECT rootpage, tbl_name FROM main.sqlite_master WHERE rootpage > 0").fetchall())
            connection.execute("PRAGMA query_only = 1")
        except BaseException:
            connection.close()
            raise
        return connection

    @contextmanager
    def _library_attached(self, connection: sqlite3.Connection) -> Iterator[None]:
        """The library, attached read-only while our own code copies from it; detached before any statement
        runs (a connection that cannot detach it is closed: no statement ever runs beside the library)."""
        connection.execute("ATTACH DATABASE ? AS library", (self._library_uri,))
        try:
            yield
        finally:
            try:
                connection.execute("DETACH DATABASE library")
            except sqlite3.DatabaseError as error:
                connection.close()
                raise MemoryStoreError(f"cannot read this video's memory: {error}") from error

    def _ready(self, statement: str) -> None:
        if not self._unfilled:
            return
        probe = f"EXPLAIN {_EXPLAINED.sub('', statement)}"  # the user's own EXPLAIN, probed as its statement
        opened = {row[3] for row in self._conn.execute(probe) if row[1] in _OPENING_OPCODES}
        needed = {self._tables_by_page[page] for page in opened if page in self._tables_by_page} & self._unfilled
        if needed:
            self._fill(sorted(needed))

    def _fill(self, tables: list[str]) -> None:
        """Copy this video's rows of ``tables`` in, the guards off (our own statements; none of the user's runs;
        a value stored longer than a statement may make is copied, and refused only when a statement reads it)."""
        self._conn.set_authorizer(None)
        self._conn.set_progress_handler(None, 0)
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _STORED_VALUE_BYTES)
        try:
            self._conn.execute("PRAGMA query_only = 0")
            with self._library_attached(self._conn):
                try:
                    self._conn.execute("BEGIN")
                    for table in tables:
                        self._conn.execute(f"INSERT INTO main.{table} SELECT * FROM library.{table} "
                                           f"WHERE video_id = ?", (self.video_id,))
                    self._conn.execute("COMMIT")
                except sqlite3.DatabaseError:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise
            self._unfilled.difference_update(tables)
        except sqlite3.DatabaseError as error:
            raise MemoryStoreError(f"cannot read this video's memory: {error}") from error
        finally:
            self._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
            self._conn.execute("PRAGMA query_only = 1")
            self._conn.set_authorizer(self._authorize)
            self._conn.set_progress_handler(self._check_deadline, _PROGRESS_STEPS)


_PRINTF_SPEC = re.compile(r"%[-+ #0!,]*(\*|\d*)(?:\.(\*|\d*))?")


def _printf_sizes(template: str, values: tuple[Any, ...]) -> Iterator[int]:
    """Every width and precision ``template`` asks for, literal or taken from ``values`` (``*``)."""
    position = 0
    for match in _PRINTF_SPEC.finditer(template):
        for size in match.groups():
            if size == "*":
                value = values[position] if position < len(values) else 0
                position += 1
                yield _as_size(value)
            elif size:
                yield int(size)
        position += 1  # the value the conversion formats


def _as_size(value: Any) -> int:
    """A ``*`` width as SQLite reads it (a number, or text that starts with one); 0 for anything else."""
    try:
        number = float(value) if isinstance(value, (int, float, str)) else 0.0
    except ValueError:
        match = re.match(r"\s*[-+]?\d+", str(value))
        number = float(match.group()) if match else 0.0
    return int(abs(number)) if math.isfinite(number) else MAX_VALUE_BYTES + 1


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
