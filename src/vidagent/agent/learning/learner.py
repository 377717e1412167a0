"""AssistGPT's Learner: checks a finished attempt, so the planner can try again and keep what worked.

Two modes, by what is known. With a ``Reference`` (a known answer, given when teaching) the
attempt passes when its answer matches: the option's index for multiple choice, else the same
words or, failing that, the model's judgement that both mean the same. Without one, the model
checks the attempt itself: is the answer supported by the observations, consistent, and in the
required form.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Literal

from vidagent.agent.react_steps import answer_format
from vidagent.agent.steps import EvaluationStep, Trace, model_cost
from vidagent.agent.task import Task
from vidagent.llm.base import Message
from vidagent.llm.metered import MeteredChat
from vidagent.prompts import prompt

PROMPTS = "vidagent.agent"
CheckMode = Literal["reference", "self_check"]


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str
    mode: CheckMode


@dataclass(frozen=True)
class Learner:
    """Judges attempts; ``self_check=False`` passes every attempt that has no reference to compare with."""

    self_check: bool = True

    def check(self, task: Task, steps: str, answer: str, choice_index: int | None, llm: MeteredChat,
              trace: Trace, parent_id: int) -> Verdict:
        """Judge one attempt and record the verdict as an ``EvaluationStep`` under ``parent_id``."""
        started = time.perf_counter()
        cost: dict[str, object] = {}
        output = ""
        if task.reference is not None:
            verdict, output, cost = self._against_reference(task, answer, choice_index, llm, started)
        elif self.self_check:
            check = prompt(PROMPTS, "learner_self_check")
            request = check.render(question=task.question, options=task.options_text(), steps=steps, answer=answer,
                                   answer_format=answer_format(task))
            completion = llm.chat([Message("user", request)], max_tokens=check.budget, stop=check.stop)
            output, cost = completion.text, model_cost(completion, started)
            verdict = _verdict(output, "self_check")
        else:
            verdict = Verdict(True, "not checked", "self_check")
        trace.add(EvaluationStep(parent_id=parent_id, text=f"{verdict.mode}: {'passed' if verdict.passed else 'failed'}"
                                 f" ({verdict.reason})", score=1.0 if verdict.passed else 0.0, model_output=output,
                                 **cost))  # type: ignore[arg-type]
        return verdict

    def _against_reference(self, task: Task, answer: str, choice_index: int | None, llm: MeteredChat,
                           started: float) -> tuple[Verdict, str, dict[str, object]]:
        reference = task.reference
        assert reference is not None
        if task.choices and reference.choice_index is not None:
            passed = choice_index == reference.choice_index
            return Verdict(passed, "the chosen option is the correct one" if passed
                           else "the chosen option is not the correct one", "reference"), "", {}
        if _words(reference.text) and _words(reference.text) <= _words(answer):
            return Verdict(True, "the answer contains the correct answer's words", "reference"), "", {}
        check = prompt(PROMPTS, "learner_reference_check")
        request = check.render(question=task.question, reference=reference.text, answer=answer)
        completion = llm.chat([Message("user", request)], max_tokens=check.budget, stop=check.stop)
        verdict = _verdict(completion.text, "reference")
        reason = "it means the same as the correct answer" if verdict.passed else "it differs from the correct answer"
        return Verdict(verdict.passed, reason, "reference"), completion.text, model_cost(completion, started)


def _verdict(reply: str, mode: CheckMode) -> Verdict:
    text = reply.strip()
    first = re.split(r"[\s:.,]+", text.lower(), maxsplit=1)[0] if text else ""
    if first in ("yes", "correct", "true", "pass", "passed"):
        return Verdict(True, "the check found nothing wrong", mode)
    reason = re.sub(r"^\W*no\W*", "", text, flags=re.IGNORECASE).strip() or "the check said no"
    if first not in ("no", "incorrect", "false", "fail", "failed"):
        reason = f"unclear check ({' '.join(text.split())[:80] or 'empty reply'}); counted as failed"
    return Verdict(False, " ".join(reason.split())[:300], mode)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower())) - {"a", "an", "the", "of", "is", "it"}
