"""The results file of a run: one JSON row per answered question, appended as answers arrive.

A killed run leaves at most one half-written last line; ``ResultsFile.load`` drops it (and any
other unreadable line), so the next run re-answers exactly the questions that have no row.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO

from vidagent.eval.errors import EvalError


class ResultsFile:
    """``results.jsonl`` in a run folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sink: TextIO | None = None

    def load(self) -> dict[str, dict[str, Any]]:
        """Rows already written, by question id; the file is repaired if its end was cut off."""
        if not self.path.exists():
            return {}
        try:
            raw = self.path.read_bytes()
        except OSError as error:
            raise EvalError(f"cannot read {self.path}: {error}") from None
        rows: dict[str, dict[str, Any]] = {}
        good_lines: list[bytes] = []
        damaged = False
        for line in raw.split(b"\n"):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                damaged = True
                continue
            if not isinstance(row, dict) or "id" not in row:
                damaged = True
                continue
            rows[str(row["id"])] = row
            good_lines.append(line)
        if damaged or (raw and not raw.endswith(b"\n")):
            temporary = self.path.with_suffix(".jsonl.tmp")
            temporary.write_bytes(b"".join(line + b"\n" for line in good_lines))
            os.replace(temporary, self.path)
        return rows

    def append(self, row: dict[str, Any]) -> None:
        if self._sink is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._sink = self.path.open("a", encoding="utf-8")
        self._sink.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._sink.flush()

    def close(self) -> None:
        if self._sink is not None:
            self._sink.close()
            self._sink = None
