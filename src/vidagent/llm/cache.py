"""A persistent cache of chat responses, keyed by everything that determines the answer.

Stored in SQLite (WAL mode, one short transaction per read or write), so several processes
can share one cache file. Images count through a digest of their pixels.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from vidagent.errors import LLMError
from vidagent.llm.base import Completion, Message, Sampling
from vidagent.sqlite import add_missing_columns, open_sqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created REAL NOT NULL,
    others TEXT NOT NULL DEFAULT '[]',
    logprobs TEXT NOT NULL DEFAULT '[]',
    token_logprobs TEXT NOT NULL DEFAULT '[]'
)
"""


def image_digest(image: np.ndarray) -> str:
    """sha256 of an image's shape, dtype and pixels."""
    array = np.ascontiguousarray(image)
    h = hashlib.sha256(f"{array.shape}|{array.dtype}|".encode())
    h.update(array.tobytes())
    return h.hexdigest()


def cache_key(backend: str, messages: Sequence[Message], *, stop: Sequence[str],
              max_tokens: int, sampling: Sampling, continuation: str = "") -> str:
    """sha256 of a canonical JSON of a chat request."""
    request = {
        "backend": backend,
        "messages": [
            {"role": m.role, "content": m.content, "images": [image_digest(i) for i in m.images]}
            for m in messages
        ],
        "stop": list(stop),
        "max_tokens": int(max_tokens),
        "temperature": float(sampling.temperature),
        "seed": sampling.seed,
        "n": int(sampling.n),
    }
    if sampling.top_logprobs:  # absent otherwise, so keys written before it existed still match
        request["top_logprobs"] = int(sampling.top_logprobs)
    if continuation:  # likewise
        request["continuation"] = continuation
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedResponse:
    """What the cache keeps of a completion."""

    texts: tuple[str, ...]
    prompt_tokens: int
    completion_tokens: int
    first_token_logprobs: tuple[tuple[str, float], ...] = ()
    token_logprobs: tuple[float, ...] = ()


class ResponseCache:
    """A SQLite-backed map from ``cache_key`` to ``CachedResponse``."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._db = open_sqlite(self.path, wal=True, synchronous="NORMAL", any_thread=True, autocommit=True)
            self._db.execute(_SCHEMA)
            add_missing_columns(self._db, "responses", {
                "others": "TEXT NOT NULL DEFAULT '[]'",  # a cache written before completions could hold several texts
                "logprobs": "TEXT NOT NULL DEFAULT '[]'",  # ... or before they could hold first-token log-probabilities
                "token_logprobs": "TEXT NOT NULL DEFAULT '[]'",  # ... or a scored continuation's
            })
        except (OSError, sqlite3.Error) as exc:
            raise LLMError(f"cannot open the LLM response cache at {self.path}: {exc}") from exc

    def get(self, key: str) -> CachedResponse | None:
        """The cached response for ``key``, or None (also when the cache cannot be read)."""
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT text, others, prompt_tokens, completion_tokens, logprobs, token_logprobs FROM responses"
                    " WHERE key = ?",
                    (key,)
                ).fetchone()
        except sqlite3.Error:
            return None
        if row is None:
            return None
        try:
            others = tuple(str(t) for t in json.loads(row[1]))
            logprobs = tuple((str(token), float(value)) for token, value in json.loads(row[4]))
            token_logprobs = tuple(float(value) for value in json.loads(row[5]))
        except (ValueError, TypeError):
            return None
        return CachedResponse((row[0],) + others, row[2], row[3], logprobs, token_logprobs)

    def put(self, key: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` (a failed write is ignored: caching is best effort)."""
        try:
            with self._lock:
                self._db.execute(
                    "INSERT OR REPLACE INTO responses (key, text, prompt_tokens, completion_tokens, created, others,"
                    " logprobs, token_logprobs) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (key, completion.text, completion.prompt_tokens, completion.completion_tokens,
                     time.time(), json.dumps(list(completion.others), ensure_ascii=False),
                     json.dumps([list(pair) for pair in completion.first_token_logprobs], ensure_ascii=False),
                     json.dumps(list(completion.token_logprobs))),
                )
        except sqlite3.Error:
            pass

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def clear(self) -> None:
        """Forget every cached response."""
        with self._lock:
            self._db.execute("DELETE FROM responses")

    def close(self) -> None:
        with self._lock:
            self._db.close()
