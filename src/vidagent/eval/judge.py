"""An optional LLM judge for open-ended answers (used with ``vidagent eval --judge``)."""

from __future__ import annotations

from dataclasses import dataclass

from vidagent.eval.dataset import EvalItem
from vidagent.llm.base import ChatModel, Message, Usage
from vidagent.llm.metered import MeteredChat
from vidagent.prompts import load_prompt, render


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
    prompt = render(load_prompt("vidagent.eval", "judge"), question=item.question,
                    reference=" / ".join(r for r in references if r), prediction=prediction)
    system = load_prompt("vidagent.eval", "judge_system").strip()
    completion = metered.chat([Message("system", system), Message("user", prompt.strip())], max_tokens=4,
                              temperature=0.0)
    reply = completion.text.strip()
    return JudgeVerdict(reply.lower().lstrip("\"'* ").startswith("yes"), reply, metered.usage)
