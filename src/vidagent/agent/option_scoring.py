"""Multiple choice by likelihood: the model's probability for each option's number as the first
token of its reply, instead of parsing an option out of generated text (the way evaluation
harnesses score choices). One call, one generated token, the prompt's prefix shared with the
conversation it follows (a local model reuses its KV cache for it).

A backend that returns no log-probabilities, or whose likeliest tokens name no option, gives
``None``: the caller falls back to reading the generated answer.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Sequence

from vidagent.agent.steps import FinalAnswerStep, Trace, model_cost
from vidagent.agent.task import Task
from vidagent.errors import PlannerError
from vidagent.llm.base import ChatModel, Message
from vidagent.prompts import prompt

PROMPTS = "vidagent.agent"
TOP_LOGPROBS = 20
CHOOSE_BY = ("text", "likelihood")


def check_choose_by(value: str) -> None:
    """A planner's ``choose_by`` option must name a way to choose."""
    if value not in CHOOSE_BY:
        raise PlannerError(f"choose_by must be one of {', '.join(CHOOSE_BY)}, got {value!r}")


@dataclass(frozen=True)
class OptionScores:
    """The chosen option and each option's probability (renormalised over the options)."""

    index: int
    probabilities: tuple[float, ...]


def option_probabilities(logprobs: Sequence[tuple[str, float]], count: int) -> tuple[float, ...] | None:
    """Each option's probability from first-token log-probabilities (tokens such as "2", " 2", "2.");
    None when no option's number is among them."""
    best: dict[int, float] = {}
    for token, logprob in logprobs:
        text = token.strip().rstrip(".):")
        if text.isdigit() and int(text) < count:
            best[int(text)] = max(best.get(int(text), -math.inf), logprob)
    if not best:
        return None
    top = max(best.values())
    weights = [math.exp(best[i] - top) if i in best else 0.0 for i in range(count)]
    total = sum(weights)
    return tuple(w / total for w in weights)


def score_options(llm: ChatModel, messages: Sequence[Message], task: Task, trace: Trace,
                  parent_id: int) -> OptionScores | None:
    """Ask which option is correct after ``messages`` and read the option numbers' probabilities;
    the call is recorded as a ``FinalAnswerStep`` (``how="likelihood"``)."""
    if not task.choices:
        return None
    started = time.perf_counter()
    which = prompt(PROMPTS, "option_number")
    request = which.render(options=task.options_text()).strip()
    completion = llm.chat([*messages, Message("user", request)], max_tokens=which.budget, stop=which.stop,
                          temperature=0.0, top_logprobs=TOP_LOGPROBS)
    probabilities = option_probabilities(completion.first_token_logprobs, len(task.choices))
    if probabilities is None:
        trace.add(FinalAnswerStep(parent_id=parent_id, thought="(no option number among the likeliest tokens)",
                                  answer=completion.text.strip(), how="likelihood", model_output=completion.text,
                                  **model_cost(completion, started)))
        return None
    index = max(range(len(probabilities)), key=lambda i: probabilities[i])
    shown = ", ".join(f"{i}: {p:.2f}" for i, p in enumerate(probabilities))
    trace.add(FinalAnswerStep(parent_id=parent_id, thought=f"(option probabilities {shown})",
                              answer=task.choices[index], how="likelihood", model_output=completion.text,
                              **model_cost(completion, started)))
    return OptionScores(index, probabilities)
