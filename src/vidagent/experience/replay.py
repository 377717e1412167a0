"""Hierarchical memory replay (DigimonGPT): choose what to show a planner before it answers.

Semantic memory is searched among the entries about the same video, procedural memory among the
workflows of the same planner and task type (plus the type's latest decision patterns), each by
cosine similarity of the questions with threshold ``tau`` (0.5 by default). The number kept of each
follows the question's complexity (``complexity.py``). The replay goes into the planner's context
as one delimited section (``experience_replay*`` in ``prompts/experience.toml``) in which every remembered text is
quoted, so text that once came from a video (on-screen words, speech) reads as data, never as an
instruction.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from vidagent.experience.complexity import Complexity, ReplaySizing, keyword_entropy, keywords, rate_complexity
from vidagent.experience.store import Entry, ExperienceStore
from vidagent.llm.metered import MeteredChat
from vidagent.prompts import prompt

PROMPTS = "vidagent.experience"
DEFAULT_TAU = 0.5


@dataclass(frozen=True)
class Replay:
    """What was chosen for one question, the complexity that sized it and what choosing cost."""

    semantic: tuple[Entry, ...] = ()
    procedural: tuple[Entry, ...] = ()  # a pattern first (if the type has one), then workflows
    complexity: Complexity | None = None
    cost: dict[str, Any] = field(default_factory=dict)  # tokens and seconds of the model's rating
    rating_output: str = ""

    def __bool__(self) -> bool:
        return bool(self.semantic or self.procedural)

    def section(self) -> str:
        """The section a planner puts before the question ('' when nothing is replayed)."""
        if not self:
            return ""
        parts = ""
        if self.semantic:
            lines = "\n".join(f"- {_quoted(e.text)}" for e in self.semantic)
            parts += prompt(PROMPTS, "experience_replay_semantic").render(lines=lines)
        if self.procedural:
            lines = "\n".join(_procedural_line(e) for e in self.procedural)
            parts += prompt(PROMPTS, "experience_replay_procedural").render(lines=lines)
        return prompt(PROMPTS, "experience_replay").render(parts=parts).strip() + "\n\n"

    def describe(self) -> str:
        """For the trace: each replayed entry by id and similarity, and the complexity."""
        def listed(entries: tuple[Entry, ...]) -> str:
            return ", ".join(f"#{e.entry_id} {e.kind}" + (f" ({e.similarity:.2f})" if e.similarity is not None else "")
                             for e in entries) or "none"

        sizing = f"; {self.complexity.describe()}" if self.complexity else ""
        return f"semantic: {listed(self.semantic)}; procedural: {listed(self.procedural)}{sizing}"


def recall(store: ExperienceStore, llm: MeteredChat, question: str, *, planner: str, video_id: str, task_type: str,
           scope: str = "", semantic: bool = True, procedural: bool = True, tau: float = DEFAULT_TAU,
           sizing: ReplaySizing = ReplaySizing()) -> Replay:
    """The entries to replay for ``question``; the model rates the question's complexity only when
    there are more candidates than the smallest replay and the rating can change its size."""
    started = time.perf_counter()
    facts = store.similar(question, "semantic", video_id=video_id, scope=scope, limit=sizing.k_max,
                          min_similarity=tau) if semantic else []
    flows = store.similar(question, "workflow", planner=planner, task_type=task_type, scope=scope,
                          limit=sizing.k_max, min_similarity=tau) if procedural else []
    patterns = store.entries(scope=scope, kind="pattern", planner=planner, task_type=task_type,
                             status="valid")[-1:] if procedural else []
    if not (facts or flows or patterns):
        return Replay()
    entropy = keyword_entropy(question)
    rating: float | None = None
    cost: dict[str, Any] = {}
    output = ""
    floor = sizing.count(sizing.score(0.0, entropy))
    if sizing.needs_rating(entropy) and max(len(facts), len(flows) + len(patterns)) > floor:
        rating, completion = rate_complexity(llm, question)
        output = completion.text
        cost = {"prompt_tokens": 0 if completion.cached else completion.prompt_tokens,
                "completion_tokens": 0 if completion.cached else completion.completion_tokens}
    score = sizing.score(0.5 if rating is None and output else (rating or 0.0), entropy)
    size = sizing.count(score)
    complexity = Complexity(keywords(question), entropy, rating, score, size)
    chosen_procedural = tuple(patterns) + tuple(flows[: max(0, size - len(patterns))])
    cost["seconds"] = time.perf_counter() - started
    return Replay(tuple(facts[:size]), chosen_procedural, complexity, cost, output)


def _quoted(text: str) -> str:
    """Remembered text as a quoted string (inner quotes and line breaks escaped)."""
    return json.dumps(" ".join(text.split()), ensure_ascii=False)


def _procedural_line(entry: Entry) -> str:
    if entry.kind == "pattern":
        return f"- decision patterns for {entry.task_type} questions: {_quoted(entry.text)}"
    return f"- for {_quoted(entry.question)}: {_quoted(entry.text)}"
