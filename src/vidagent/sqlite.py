"""Opening vidagent's SQLite files, and adding the columns an older file lacks: the one place the
connection settings live (ground: the library, the experience store, the response cache, packs and the
server's catalogue all open files this way).

A connection waits up to ``BUSY_SECONDS`` for another writer (``sqlite3.connect``'s ``timeout`` is
SQLite's busy timeout, so no ``PRAGMA busy_timeout`` is needed beside it).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Mapping

BUSY_SECONDS = 30.0


def open_sqlite(path: str | Path, *, wal: bool = False, foreign_keys: bool = False, synchronous: str = "",
                any_thread: bool = False, autocommit: bool = False) -> sqlite3.Connection:
    """A connection to the file at ``path``, its folder made first. ``wal``: write-ahead logging (readers
    never wait for a writer); ``foreign_keys``: enforce them (``ON DELETE CASCADE``); ``synchronous``: that
    ``PRAGMA synchronous`` level when given; ``any_thread``: usable from threads other than this one (the
    caller locks); ``autocommit``: each statement its own transaction unless ``BEGIN`` says otherwise."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=BUSY_SECONDS, check_same_thread=not any_thread,
                           isolation_level=None if autocommit else "")
    try:
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
        if synchronous:
            conn.execute(f"PRAGMA synchronous={synchronous}")
        if foreign_keys:
            conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """The column names of ``table``, in order (none when there is no such table)."""
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def add_missing_columns(conn: sqlite3.Connection, table: str, columns: Mapping[str, str]) -> None:
    """Add each of ``columns`` (name -> declaration) that ``table`` lacks: the migration of a file
    written before the column existed."""
    present = set(table_columns(conn, table))
    for name, declaration in columns.items():
        if name not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")
