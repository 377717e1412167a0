"""What a planner is asked: a question, its options, and the sources (videos, images, clips and
crops derived from them) it is about, each with an id that evidence and artifacts refer to."""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from vidagent.video.source import Source, SourceKind

__all__ = ["AnswerType", "Reference", "Source", "SourceKind", "Task", "open_answer", "option_label", "options_text"]

AnswerType = Literal["choice", "text", "time"]


OpenAnswer = Literal["words", "when", "count"]
_WHEN = re.compile(r"^\s*(when\b|at (roughly |about |approximately )?(what|which) (time|point|moment|second)|what time|"
                   r"(during|in) which (seconds?|part|time)|how long\b|how many (seconds|minutes)|how much time)",
                   re.IGNORECASE)
_COUNT = re.compile(r"\bhow (many|much|old|far|fast|long)\b|\bnumbers?\b|\bcount\b|\byears?\b|\bdigits?\b|"
                    r"\bscore\b|\bprice\b|\bage\b|\bpercent", re.IGNORECASE)


def options_text(choices: Sequence[str]) -> str:
    """Options numbered from 0 as prompts show them (``"\\nOptions:\\n0. ..."``); "" for none."""
    if not choices:
        return ""
    return "\nOptions:\n" + "\n".join(f"{i}. {choice}" for i, choice in enumerate(choices))


def open_answer(question: str) -> OpenAnswer:
    """What an open question asks for: a time (``when``: "When does...", "At what second..."), a
    ``count`` or other number ("How many...", "What number is printed..."), or ``words`` (why, what,
    how and the rest)."""
    if _WHEN.search(question):
        return "when"
    return "count" if _COUNT.search(question) else "words"


def option_label(index: int) -> str:
    """How people see an option: by letter (A for the first), as the page, the CLI and MCP show it;
    the prompts number options from 0 for the model (``Task.options_text``)."""
    return string.ascii_uppercase[index] if 0 <= index < 26 else str(index + 1)


@dataclass(frozen=True)
class Reference:
    """A known correct answer, given only when teaching (``vidagent eval --teach``): a planner
    that learns (PEIL's Learner) checks a finished answer against it; none reads it to answer."""

    text: str
    choice_index: int | None = None


@dataclass(frozen=True)
class Question:
    """A question as it is asked, before its sources are opened: the text and options, and what an
    evaluation knows of it: its id, whether it wants a time, a known answer for planners that learn
    from one (PEIL's Learner; no planner reads it to answer), its type as its dataset labels it."""

    text: str
    choices: tuple[str, ...] | None = None
    id: str = ""
    wants_time: bool = False
    reference: Reference | None = None
    task_type: str = ""

    def about(self, sources: tuple[Source, ...]) -> "Task":
        """The task of answering this question about ``sources``."""
        return Task(self.text, self.choices, sources, id=self.id, wants_time=self.wants_time,
                    reference=self.reference, task_type=self.task_type)


@dataclass(frozen=True)
class Task:
    """A question for a planner. ``id`` names it where it comes from a benchmark (planners that
    draw at random seed from it); ``answer_type`` is ``choice`` when there are options, else
    ``text`` unless the caller asks for a ``time`` (a localization query). ``task_type`` is the
    kind of question as its dataset labels it (NExT-QA's ``causal``, ``temporal``, ``descriptive``),
    by which experience keeps workflows; empty, the kind is told from the question's words."""

    question: str
    choices: tuple[str, ...] | None = None
    sources: tuple[Source, ...] = ()
    id: str = ""
    wants_time: bool = False
    reference: Reference | None = None
    task_type: str = ""

    def __post_init__(self) -> None:
        if not self.question.strip():
            raise ValueError("the question is empty")
        if self.choices is not None and len(self.choices) < 2:
            raise ValueError("a multiple-choice question needs at least two options")
        ids = [source.id for source in self.sources]
        if len(set(ids)) != len(ids):
            raise ValueError("the same source is given twice")

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
        return options_text(self.choices or ())

    def answer_text(self, text: str, choice_index: int | None) -> str:
        """The option's own text when an option was chosen, else ``text``."""
        return self.choices[choice_index] if self.choices and choice_index is not None else text

    @property
    def videos(self) -> tuple[Source, ...]:
        return tuple(s for s in self.sources if s.kind == "video")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "choices": list(self.choices) if self.choices else None,
                "answer_type": self.answer_type, "sources": [s.to_dict() for s in self.sources]}
