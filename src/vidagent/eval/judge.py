"""An optional LLM judge for open-ended answers (used with ``vidagent eval --judge``)."""

from __future__ import annotations

from dataclasses import dataclass

from vidagent.eval.dataset import EvalItem
from vidagent.llm.base import ChatModel, Message, Usage
from vidagent.llm.metered import MeteredChat
from vidagent.prompts import prompt


@dataclass(frozen=True)
class JudgeVerdict:
    correct: bool
    reply: str
    usage: Usage


def judge_answer(llm: ChatModel, item: EvalItem, prediction: str) -> JudgeVerdict:
    """Ask the model whether ``prediction`` means the same as the reference answer (or an accepted one)."""
    metered = MeteredChat(llm)
    if not prediction.strip():
        return JudgeVerdict(False, "(empty prediction)", metered.usage)
    references = [item.answer, *item.accept] if item.answer else list(item.accept)
    judge = prompt("vidagent.eval", "judge")
    request = judge.render(question=item.question, reference=" / ".join(r for r in references if r),
                           prediction=prediction)
    system = prompt("vidagent.eval", "judge_system").text.strip()
    completion = metered.chat([Message("system", system), Message("user", request.strip())], max_tokens=judge.budget,
                              stop=judge.stop, temperature=0.0)
    reply = completion.text.strip()
    return JudgeVerdict(reply.lower().lstrip("\"'* ").startswith("yes"), reply, metered.usage)
