"""Turning a finished episode into memories with a chat model: the summary of a validated answer
(semantic memory) and the decision patterns of a task type's workflows (procedural memory).
Prompts: ``experience_summary`` and ``experience_patterns`` in ``prompts/experience.toml``."""

from __future__ import annotations

from typing import Sequence

from vidagent.llm.base import Completion, Message
from vidagent.llm.metered import MeteredChat
from vidagent.prompts import prompt

PROMPTS = "vidagent.experience"
MAX_MEMORY_CHARS = 400


def summarise_answer(llm: MeteredChat, question: str, options: str, answer: str) -> tuple[str, Completion]:
    """One sentence stating what the answer says about the video (the question and answer quoted
    as they were when the model gives nothing usable)."""
    summary = prompt(PROMPTS, "experience_summary")
    request = summary.render(question=question, options=options, answer=answer).strip()
    completion = llm.chat([Message("user", request)], max_tokens=summary.budget, temperature=0.0, stop=summary.stop)
    sentence = " ".join(completion.text.split())[:MAX_MEMORY_CHARS]
    return sentence or f"Asked {question!r}, the answer was {answer!r}.", completion


def abstract_patterns(llm: MeteredChat, task_type: str, workflows: Sequence[tuple[str, str]]) -> tuple[str, Completion]:
    """General decision patterns from ``(question, workflow)`` pairs of one task type; the pattern
    lines only (empty when the model wrote none)."""
    listed = "\n".join(f"Question: {question}\nWorkflow: {workflow}" for question, workflow in workflows)
    patterns = prompt(PROMPTS, "experience_patterns")
    request = patterns.render(task_type=task_type, workflows=listed).strip()
    completion = llm.chat([Message("user", request)], max_tokens=patterns.budget, stop=patterns.stop, temperature=0.0)
    lines = [" ".join(line.split()) for line in completion.text.splitlines() if line.strip()]
    marked = [line for line in lines if line.startswith(("-", "*")) or line[:1].isdigit()]
    lines = [("- " + line.lstrip("-*0123456789.) ")).strip() for line in (marked or lines)[:4]]
    return "\n".join(lines)[:MAX_MEMORY_CHARS * 2], completion
