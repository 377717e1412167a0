"""Task-related memory selection (DoraemonGPT's TSM construction): the LLM reads the question and
says whether the space-dominant (object) memory is needed besides the time-dominant one.

The decision is a ``MemorySelection``, which the toolbox carries so that the planner's trace records
it (with the model's reply and its cost) as a ``memory`` step right after the task.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from vidagent.agent.steps import model_cost
from vidagent.llm.base import ChatModel, Message
from vidagent.prompts import prompt


@dataclass(frozen=True)
class MemorySelection:
    """Whether the object memory was wanted ahead of the question, and why: ``how`` is ``llm`` (the
    model was asked; its reply in ``model_output``), ``all`` (the setting builds both memories) or
    ``built`` (the object memory was already there, so nothing was asked). The setting that chooses
    between asking and ``all`` is ``Settings.memory_selection``."""

    objects: bool
    how: str
    model_output: str = ""
    cost: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        chosen = "time-dominant and space-dominant (objects)" if self.objects else "time-dominant only"
        why = {"llm": "the model's choice for this question", "all": "memory selection 'all'",
               "built": "the object memory was already built"}.get(self.how, self.how)
        return f"memory selection: {chosen} ({why})"


def select_memory(llm: ChatModel, question: str) -> MemorySelection:
    """Ask the model whether the question needs the space-dominant memory."""
    started = time.perf_counter()
    selection = prompt("vidagent.agent", "memory_selection")
    request = selection.render(question=question.strip())
    completion = llm.chat([Message("user", request)], max_tokens=selection.budget, stop=selection.stop)
    wanted = re.match(r"\W*(yes|y|space)", completion.text.strip(), re.IGNORECASE) is not None
    return MemorySelection(wanted, "llm", completion.text, model_cost(completion, started))
