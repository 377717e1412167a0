"""A persistent bank of in-context examples, kept in the library database.

AssistGPT's Learner stores a reasoning trace that succeeded after a failed try; later questions
retrieve the most similar stored questions' traces as examples for their planner. Examples have a
``kind`` and the ``planner`` that made them, so memories that evolve across questions (DigimonGPT's
semantic and procedural memory) share the table and the retrieval.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from vidagent.errors import MemoryStoreError
from vidagent.perception.base import TextEmbedder

DEFAULT_MIN_SIMILARITY = 0.8


@dataclass(frozen=True)
class Example:
    kind: str
    planner: str
    question: str
    text: str
    answer: str
    checked_by: str
    attempts: int
    example_id: int | None = None
    similarity: float | None = None


class ExampleBank:
    """Stores and retrieves examples; questions are compared by their text embeddings."""

    def __init__(self, path: str | Path, embedder: TextEmbedder) -> None:
        self.path = Path(path)
        self.embedder = embedder
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA busy_timeout=30000")
            self._conn.executescript(resources.files("vidagent.experience").joinpath("schema.sql").read_text())
        except sqlite3.DatabaseError as error:
            raise MemoryStoreError(f"cannot open the example bank in {self.path}: {error}") from error

    def add(self, example: Example) -> bool:
        """Keep an example; False when the same one is already kept."""
        vector = np.asarray(self.embedder.embed_queries([example.question])[0], np.float32)
        with self._lock:
            cursor = self._conn.execute(
                "INSERT OR IGNORE INTO experience_examples (kind, planner, question, embedding, text, answer, "
                "checked_by, attempts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (example.kind, example.planner, example.question, vector.tobytes(), example.text, example.answer,
                 example.checked_by, example.attempts, time.time()))
        return cursor.rowcount == 1

    def similar(self, question: str, kind: str, planner: str, *, limit: int = 2,
                min_similarity: float = DEFAULT_MIN_SIMILARITY) -> list[Example]:
        """The stored examples whose questions are most like ``question``, most similar first."""
        if limit <= 0:
            return []
        with self._lock:
            rows = self._conn.execute(
                "SELECT example_id, question, embedding, text, answer, checked_by, attempts FROM experience_examples "
                "WHERE kind=? AND planner=?", (kind, planner)).fetchall()
        if not rows:
            return []
        query = np.asarray(self.embedder.embed_queries([question])[0], np.float32)
        scores = np.stack([np.frombuffer(row[2], np.float32) for row in rows]) @ query
        order = [i for i in np.argsort(-scores, kind="stable") if scores[i] >= min_similarity][:limit]
        return [Example(kind, planner, rows[i][1], rows[i][3], rows[i][4], rows[i][5], rows[i][6],
                        example_id=rows[i][0], similarity=float(scores[i])) for i in order]

    def count(self, kind: str | None = None) -> int:
        with self._lock:
            if kind is None:
                return self._conn.execute("SELECT COUNT(*) FROM experience_examples").fetchone()[0]
            return self._conn.execute("SELECT COUNT(*) FROM experience_examples WHERE kind=?", (kind,)).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
