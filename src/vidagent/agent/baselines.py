"""Baselines that make a planner's gains measurable; planners like any other.

``caption_only``: every segment description in one prompt and one model call (as in LLoVi).
``random``: a uniformly random option (or window), seeded by the task id, with no model at all.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import ClassVar

from vidagent.agent.answer import Answer, Candidate
from vidagent.agent.option_scoring import check_choose_by, score_options
from vidagent.agent.parsing import extract_choice
from vidagent.agent.planner import metered, register_planner, start
from vidagent.agent.steps import FinalAnswerStep, Trace
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.errors import PlannerError
from vidagent.llm.base import ChatModel, Message
from vidagent.prompts import load_prompt, render
from vidagent.tools.observed import segment_text

PROMPTS = "vidagent.agent"
CHARS_PER_TOKEN = 3.0
PROMPT_RESERVE_TOKENS = 600


@register_planner("caption_only")
@dataclass
class CaptionOnlyPlanner:
    """Options: ``context_tokens`` (default: the chat model's, from the toolbox; the descriptions
    are thinned evenly to fit it), ``answer_tokens``, ``choose_by`` (``text``: the option the
    generated answer names; ``likelihood``: the option whose number the model finds likeliest,
    one generated token)."""

    context_tokens: int | None = None
    answer_tokens: int = 60
    choose_by: str = "text"
    name: ClassVar[str] = "caption_only"
    tools: ClassVar[tuple[str, ...] | None] = ()
    reads_memory: ClassVar[bool] = True
    uses_llm: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_choose_by(self.choose_by)

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel | None, trace: Trace | None = None) -> Answer:
        if llm is None:
            raise PlannerError("the caption-only planner needs a chat model")
        model = metered(llm)
        trace, root = start(task, trace, toolbox)
        started = time.perf_counter()
        lines = [f"[{s.start_s:.1f}-{s.end_s:.1f} s] {segment_text(s)}"
                 for memory in toolbox.memories.values() for s in memory.segments]
        context = self.context_tokens or toolbox.context_tokens
        budget = int((context - PROMPT_RESERVE_TOKENS - self.answer_tokens) * CHARS_PER_TOKEN)
        kept = fit_evenly(lines, budget)
        note = "" if len(kept) == len(lines) else f"{len(kept)} of {len(lines)} segment descriptions fit the context"
        system = render(load_prompt(PROMPTS, "caption_only_system"), memory_note=toolbox.memory_note).strip()
        body = render(load_prompt(PROMPTS, "caption_only"), captions="\n".join(kept), question=task.question,
                      options=task.options_text()).strip()
        body = toolbox.experience() + body
        if self.choose_by == "likelihood" and task.choices:
            scores = score_options(model, [Message("system", system), Message("user", body)], task, trace, root.id)
            if scores is not None:
                text = task.choices[scores.index]
                candidate = Candidate(text, scores.index, likelihood=round(scores.probabilities[scores.index], 4),
                                      step_id=len(trace) - 1)
                return Answer(task=task, text=text, planner=self.name, choice_index=scores.index,
                              candidates=[candidate], trace=trace, usage=model.usage)
        answer_format = load_prompt(PROMPTS, f"answer_format_{task.answer_type}").strip()
        prompt = body + "\n" + render(load_prompt(PROMPTS, "answer_line"), answer_format=answer_format).strip()
        completion = model.chat([Message("system", system), Message("user", prompt)],
                                  max_tokens=self.answer_tokens, temperature=0.0)
        text = answer_line(completion.text)
        choice_index = extract_choice(text, task.choices) if task.choices else None
        step = trace.add(FinalAnswerStep(parent_id=root.id, thought=note, answer=text, model_output=completion.text,
                                         prompt_tokens=completion.prompt_tokens,
                                         completion_tokens=completion.completion_tokens,
                                         seconds=time.perf_counter() - started))
        text = task.answer_text(text, choice_index)
        return Answer(task=task, text=text, planner=self.name, choice_index=choice_index,
                      candidates=[Candidate(text, choice_index, step_id=step.id)], trace=trace, usage=model.usage)


@register_planner("random")
@dataclass
class RandomPlanner:
    """Chance level: a uniformly random option; a random window for a time; no answer otherwise."""

    name: ClassVar[str] = "random"
    tools: ClassVar[tuple[str, ...] | None] = ()
    reads_memory: ClassVar[bool] = False
    uses_llm: ClassVar[bool] = False

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel | None, trace: Trace | None = None) -> Answer:
        trace, root = start(task, trace, toolbox)
        rng = random.Random(task.seed)
        choice_index = None
        text = ""
        if task.choices:
            choice_index = rng.randrange(len(task.choices))
            text = task.choices[choice_index]
        elif task.answer_type == "time" and toolbox.video is not None:
            duration = toolbox.video.duration_s
            begin = rng.uniform(0.0, max(0.0, duration - 2.0))
            end = min(duration, begin + rng.uniform(1.0, max(1.0, duration / 4)))
            text = f"{begin:.1f} - {end:.1f}"
        step = trace.add(FinalAnswerStep(parent_id=root.id, answer=text, how="random"))
        return Answer(task=task, text=text, planner=self.name, choice_index=choice_index,
                      candidates=[Candidate(text, choice_index, step_id=step.id)], trace=trace)


def fit_evenly(lines: list[str], budget_chars: int) -> list[str]:
    """All lines if they fit, else an evenly spaced subset that does (first and last kept)."""
    if sum(len(line) + 1 for line in lines) <= budget_chars or len(lines) <= 2:
        return lines
    mean = sum(len(line) + 1 for line in lines) / len(lines)
    count = max(2, min(len(lines), int(budget_chars / mean)))
    step = (len(lines) - 1) / (count - 1)
    return [lines[round(i * step)] for i in range(count)]


def answer_line(text: str) -> str:
    """The text after the last "Answer:" label, else the whole reply, on one line."""
    lowered = text.lower()
    at = lowered.rfind("answer:")
    found = text[at + len("answer:"):] if at >= 0 else text
    return " ".join(found.strip().strip('"').split())
