"""What a planner is asked: a question, its options, and the sources (videos, images, clips and
crops derived from them) it is about, each with an id that evidence and artifacts refer to."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

SourceKind = Literal["video", "image", "clip", "crop"]
AnswerType = Literal["choice", "text", "time"]


@dataclass(frozen=True)
class Source:
    """One input. A clip is a ``window`` (seconds) of its ``parent``; a crop is a ``box``
    (x1, y1, x2, y2 in pixels) of its parent at ``window[0]``."""

    id: str
    kind: SourceKind = "video"
    path: str = ""
    parent: str | None = None
    window: tuple[float, float] | None = None
    box: tuple[float, float, float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "path": self.path, "parent": self.parent,
                "window": list(self.window) if self.window else None, "box": list(self.box) if self.box else None}


@dataclass(frozen=True)
class Task:
    """A question for a planner. ``id`` names it where it comes from a benchmark (planners that
    draw at random seed from it); ``answer_type`` is ``choice`` when there are options, else
    ``text`` unless the caller asks for a ``time`` (a localization query)."""

    question: str
    choices: tuple[str, ...] | None = None
    sources: tuple[Source, ...] = ()
    id: str = ""
    wants_time: bool = False

    def __post_init__(self) -> None:
        if not self.question.strip():
            raise ValueError("the question is empty")
        if self.choices is not None and len(self.choices) < 2:
            raise ValueError("a multiple-choice question needs at least two options")

    @property
    def answer_type(self) -> AnswerType:
        if self.choices:
            return "choice"
        return "time" if self.wants_time else "text"

    @property
    def seed(self) -> int:
        """A number that depends only on the task's id (or question): the same in every process and run."""
        return int.from_bytes(hashlib.sha256((self.id or self.question).encode()).digest()[:8], "big")

    def options_text(self) -> str:
        """The options as prompts show them (``"\\nOptions:\\n0. ..."``), or "" for an open question."""
        if not self.choices:
            return ""
        return "\nOptions:\n" + "\n".join(f"{i}. {choice}" for i, choice in enumerate(self.choices))

    def answer_text(self, text: str, choice_index: int | None) -> str:
        """The option's own text when an option was chosen, else ``text``."""
        return self.choices[choice_index] if self.choices and choice_index is not None else text

    @property
    def videos(self) -> tuple[Source, ...]:
        return tuple(s for s in self.sources if s.kind == "video")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "choices": list(self.choices) if self.choices else None,
                "answer_type": self.answer_type, "sources": [s.to_dict() for s in self.sources]}
