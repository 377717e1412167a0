"""Experience kept across questions, in the library database: one store for every kind.

DigimonGPT's semantic memory (validated answers about a video), its procedural memory (the tool
workflows of successful episodes, and decision patterns abstracted from them) and AssistGPT's
Learner (traces that succeeded after a failed try) are the same mechanism: text made from a past
episode, keyed by the embedding of its question, retrieved by similarity for a later question and
shown to the planner as data. They differ only in ``kind`` and in what they are filtered by
(the video for semantic memory, the task type for workflows and patterns).

The store is append-only: entries are added with their provenance (the question, answer, model
and trace that made them) and never changed; ``clear`` deletes exactly what it names. Entries
that failed validation are kept with ``status='rejected'`` for inspection and never retrieved.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from vidagent.errors import MemoryStoreError
from vidagent.perception.base import TextEmbedder
from vidagent.sqlite import open_sqlite

DEFAULT_MIN_SIMILARITY = 0.8
VALID = "valid"
REJECTED = "rejected"
KINDS = ("semantic", "workflow", "pattern", "trace")

_COLUMNS = ("entry_id", "kind", "scope", "planner", "video_id", "task_type", "question", "text", "answer", "status",
            "checked_by", "attempts", "model", "provenance", "created_at")


@dataclass(frozen=True)
class Entry:
    """One remembered thing. ``similarity`` is set on entries that ``similar`` found."""

    kind: str
    planner: str
    question: str
    text: str
    answer: str
    checked_by: str
    attempts: int = 1
    video_id: str = ""
    task_type: str = ""
    status: str = VALID
    model: str = ""
    provenance: Mapping[str, Any] = field(default_factory=dict)
    scope: str = ""
    entry_id: int | None = None
    similarity: float | None = None
    created_at: float | None = None

    def to_dict(self, *, with_provenance: bool = True) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _COLUMNS if name != "provenance"}
        if with_provenance:
            data["provenance"] = dict(self.provenance)
        if self.similarity is not None:
            data["similarity"] = round(self.similarity, 4)
        return data


class ExperienceStore:
    """Stores and retrieves entries; questions are compared by their text embeddings (cosine). Without
    an ``embedder`` the store can list, show and clear entries but not add or search them."""

    def __init__(self, path: str | Path, embedder: TextEmbedder | None = None) -> None:
        self.path = Path(path)
        self.embedder = embedder
        self._lock = threading.Lock()
        try:
            self._conn = open_sqlite(self.path, any_thread=True, autocommit=True)
            self._conn.executescript(resources.files("vidagent.experience").joinpath("schema.sql").read_text())
            self._adopt_example_bank()
        except sqlite3.DatabaseError as error:
            raise MemoryStoreError(f"cannot open the experience store in {self.path}: {error}") from error

    # -- writing -----------------------------------------------------------------------------------
    def add(self, entry: Entry) -> int | None:
        """Keep an entry; its id, or None when the same one is already kept."""
        vector = self._embed(entry.question)
        with self._lock:
            cursor = self._conn.execute(
                "INSERT OR IGNORE INTO experience (kind, scope, planner, video_id, task_type, question, embedding, "
                "text, answer, status, checked_by, attempts, model, provenance, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (entry.kind, entry.scope, entry.planner, entry.video_id, entry.task_type, entry.question,
                 vector.tobytes(), entry.text, entry.answer, entry.status, entry.checked_by, entry.attempts,
                 entry.model, json.dumps(dict(entry.provenance), default=str), time.time()))
        return cursor.lastrowid if cursor.rowcount == 1 else None

    def clear(self, *, scope: str | None = "", kind: str | None = None, video_id: str | None = None) -> int:
        """Delete the entries of ``scope`` (``None``: every scope) of that kind and video; how many went."""
        where, values = _where(scope=scope, kind=kind, video_id=video_id)
        with self._lock:
            return self._conn.execute(f"DELETE FROM experience{where}", values).rowcount

    def forget_unfinished(self, scope: str, finished: set[str]) -> int:
        """Delete the entries of ``scope`` made by tasks not in ``finished`` (task ids), and the patterns
        abstracted from any of them: what a killed run kept for the question it did not finish, so a
        resumed run equals an uninterrupted one. How many went."""
        with self._lock:
            rows = self._conn.execute("SELECT entry_id, kind, provenance FROM experience WHERE scope=?",
                                      (scope,)).fetchall()
            made = {row[0]: (row[1], json.loads(row[2] or "{}")) for row in rows}
            doomed = {entry_id for entry_id, (kind, provenance) in made.items()
                      if kind != "pattern" and str(provenance.get("task_id", "")) not in finished}
            doomed |= {entry_id for entry_id, (kind, provenance) in made.items()
                       if kind == "pattern" and doomed & set(provenance.get("entries", []))}
            self._conn.executemany("DELETE FROM experience WHERE entry_id=?", [(i,) for i in sorted(doomed)])
        return len(doomed)

    # -- reading -----------------------------------------------------------------------------------
    def similar(self, question: str, kind: str, *, planner: str | None = None, video_id: str | None = None,
                task_type: str | None = None, scope: str = "", limit: int = 2,
                min_similarity: float = DEFAULT_MIN_SIMILARITY) -> list[Entry]:
        """The valid entries whose questions are most like ``question``, most similar first."""
        if limit <= 0:
            return []
        where, values = _where(scope=scope, kind=kind, planner=planner, video_id=video_id, task_type=task_type,
                               status=VALID)
        with self._lock:
            rows = self._conn.execute(f"SELECT {', '.join(_COLUMNS)}, embedding FROM experience{where}",
                                      values).fetchall()
        if not rows:
            return []
        scores = np.stack([np.frombuffer(row[-1], np.float32) for row in rows]) @ self._embed(question)
        order = [i for i in np.argsort(-scores, kind="stable") if scores[i] >= min_similarity][:limit]
        return [_entry(rows[i][:-1], similarity=float(scores[i])) for i in order]

    def entries(self, *, scope: str | None = "", kind: str | None = None, video_id: str | None = None,
                planner: str | None = None, task_type: str | None = None, status: str | None = None) -> list[Entry]:
        """Entries in the order they were kept (``None`` for a filter: any)."""
        where, values = _where(scope=scope, kind=kind, video_id=video_id, planner=planner, task_type=task_type,
                               status=status)
        with self._lock:
            rows = self._conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM experience{where} ORDER BY entry_id",
                                      values).fetchall()
        return [_entry(row) for row in rows]

    def get(self, entry_id: int) -> Entry | None:
        with self._lock:
            row = self._conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM experience WHERE entry_id=?",
                                     (entry_id,)).fetchone()
        return _entry(row) if row else None

    def count(self, kind: str | None = None, *, scope: str | None = "", planner: str | None = None,
              task_type: str | None = None, status: str | None = VALID) -> int:
        where, values = _where(scope=scope, kind=kind, planner=planner, task_type=task_type, status=status)
        with self._lock:
            return int(self._conn.execute(f"SELECT COUNT(*) FROM experience{where}", values).fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- helpers -----------------------------------------------------------------------------------
    def video_ids(self) -> list[str]:
        """Every video (or set of sources) some entry is about."""
        with self._lock:
            return [row[0] for row in self._conn.execute(
                "SELECT DISTINCT video_id FROM experience WHERE video_id != '' ORDER BY video_id")]

    def _embed(self, question: str) -> np.ndarray:
        if self.embedder is None:
            raise MemoryStoreError("this experience store was opened without a text embedder")
        return np.asarray(self.embedder.embed_queries([question])[0], np.float32)

    def _adopt_example_bank(self) -> None:
        """Move the rows of the earlier ``experience_examples`` table (Learner traces) into ``experience``."""
        if not self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='experience_examples'"
                                  ).fetchone():
            return
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute(
                    "INSERT OR IGNORE INTO experience (kind, planner, question, embedding, text, answer, checked_by, "
                    "attempts, created_at) SELECT kind, planner, question, embedding, text, answer, checked_by, "
                    "attempts, created_at FROM experience_examples")
                self._conn.execute("DROP TABLE experience_examples")
                self._conn.execute("COMMIT")
            except sqlite3.DatabaseError:
                self._conn.execute("ROLLBACK")
                raise


def _where(**filters: str | None) -> tuple[str, list[str]]:
    chosen = [(name, value) for name, value in filters.items() if value is not None]
    if not chosen:
        return "", []
    return " WHERE " + " AND ".join(f"{name}=?" for name, _ in chosen), [value for _, value in chosen]  # type: ignore[misc]


def _entry(row: tuple[Any, ...], similarity: float | None = None) -> Entry:
    values = dict(zip(_COLUMNS, row))
    values["provenance"] = json.loads(values["provenance"] or "{}")
    return Entry(similarity=similarity, **values)
