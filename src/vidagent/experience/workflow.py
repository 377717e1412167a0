"""An episode's tool workflow: which tools were called in what order, and which call used which
earlier call's result (DigimonGPT's procedural memory keeps "the sequence and dependencies of tool
invocations").

A workflow keeps the tools and the names of the arguments given, not their values: values are about
one video (and may be text read from it), while the shape of the work carries over to other videos.
A call is taken to use an earlier call's result when one of its argument values holds a number (a
time, a segment, an object or a source index) that appeared in that call's observation and not in
the question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class WorkflowCall:
    tool: str
    arguments: tuple[str, ...]  # the names of the arguments given
    uses: tuple[int, ...] = ()  # 1-based numbers of the earlier calls whose results it used

    def render(self, number: int) -> str:
        uses = f" using the result of {', '.join(str(u) for u in self.uses)}" if self.uses else ""
        return f"{number}. {self.tool}({', '.join(self.arguments)}){uses}"


@dataclass(frozen=True)
class Workflow:
    calls: tuple[WorkflowCall, ...]

    def render(self) -> str:
        """One line: ``1. segment_localization(query); 2. visual_question_answering(question, segment_id) using the
        result of 1``."""
        return "; ".join(call.render(i) for i, call in enumerate(self.calls, 1))

    def to_list(self) -> list[dict[str, Any]]:
        return [{"tool": c.tool, "arguments": list(c.arguments), "uses": list(c.uses)} for c in self.calls]


@dataclass(frozen=True)
class ToolUse:
    """One call as an episode's trace shows it."""

    tool: str
    arguments: Mapping[str, Any]
    observation: str


def workflow_of(question: str, uses: Sequence[ToolUse]) -> Workflow:
    """The workflow of an episode's calls, in order, with the dependencies found between them."""
    asked = _tokens(question)
    seen: list[set[str]] = []
    calls = []
    for use in uses:
        given = set().union(*(_tokens(str(value)) for value in use.arguments.values())) - asked if use.arguments \
            else set()
        depends = tuple(i + 1 for i, found in enumerate(seen) if given & found)
        calls.append(WorkflowCall(use.tool, tuple(use.arguments), depends))
        seen.append(_tokens(use.observation))
    return Workflow(tuple(calls))


def _tokens(text: str) -> set[str]:
    """The numbers in ``text`` (``2.50`` and ``2.5`` alike): what ties an argument to the observation it was read from."""
    return {n.rstrip("0").rstrip(".") if "." in n else n for n in re.findall(r"\d+(?:\.\d+)?", text)}
