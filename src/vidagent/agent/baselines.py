"""Baselines that make a planner's gains measurable; planners like any other.

``caption_only``: every segment description in one prompt and one model call (as in LLoVi).
``random``: a uniformly random option (or window), seeded by the task id, with no model at all.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import ClassVar, Sequence, TypeVar

from vidagent.agent.answer import Answer
from vidagent.agent.option_scoring import check_choose_by, orders_for, score_options
from vidagent.agent.parsing import extract_choice
from vidagent.agent.planning import Needs, Run
from vidagent.agent.steps import FinalAnswerStep, Trace
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.errors import PlannerError
from vidagent.llm.base import ChatModel, Message
from vidagent.memory.store import SegmentRecord
from vidagent.prompts import prompt
from vidagent.tools.base import Evidence
from vidagent.tools.observed import segment_text
from vidagent.video.sampling import stepped_indices

T = TypeVar("T")

PROMPTS = "vidagent.agent"
CHARS_PER_TOKEN = 3.0
PROMPT_RESERVE_TOKENS = 600


@dataclass
class CaptionOnlyPlanner:
    """Options: ``context_tokens`` (default: the chat model's, from the toolbox; the descriptions
    are thinned evenly to fit it), ``answer_tokens`` (default: the ``answer_line`` prompt's budget, in
    ``prompts/caption_only.toml``; an option overrides it), ``choose_by`` (``text``: the option the
    generated answer names; ``likelihood``: the option whose number the model finds likeliest,
    one generated token; ``permuted``: the same asked once per cyclic order of the options, averaged,
    so that a preference for a position cancels out), ``line_seconds`` (0: one line per segment; else
    consecutive segments share a line of that many seconds, so that short captions, e.g. one a second,
    are not outweighed by their time labels: a small model's tokenizer reads each digit as a token),
    ``lines`` (0: every line that fits; else at most that many, evenly spread, first and last kept: how
    well a few captions answer against all of them)."""

    context_tokens: int | None = None
    answer_tokens: int | None = None
    line_seconds: float = 0.0
    lines: int = 0
    choose_by: str = "text"
    name: ClassVar[str] = "caption_only"
    needs: ClassVar[Needs] = Needs()

    def __post_init__(self) -> None:
        check_choose_by(self.choose_by)
        if self.line_seconds < 0:
            raise PlannerError("line_seconds must be 0 (a line per segment) or more")
        if self.lines < 0:
            raise PlannerError("lines must be 0 (every line that fits) or more")

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel, trace: Trace | None = None) -> Answer:
        run = Run.begin(self.name, task, toolbox, llm, trace)
        model, trace, root = run.llm, run.trace, run.root
        started = time.perf_counter()
        groups = [(source, group) for source, memory in toolbox.memories.items()
                  for group in line_groups(memory.segments, self.line_seconds)]
        read = [Evidence(group[0].start_s, group[-1].end_s, "; ".join(segment_text(s) for s in group), source)
                for source, group in groups]
        lines = [f"[{item.start_s:.1f}-{item.end_s:.1f} s] {item.text}" for item in read]
        context = self.context_tokens or toolbox.context_tokens
        answer_prompt = prompt(PROMPTS, "answer_line")
        answer_tokens = self.answer_tokens or answer_prompt.budget
        budget = context - PROMPT_RESERVE_TOKENS - answer_tokens
        pool = list(range(len(lines)))
        if 0 < self.lines < len(pool):
            pool = [pool[i] for i in stepped_indices(len(pool), self.lines)]
        chosen = fit_evenly(pool, budget, [estimated_tokens(lines[i]) + 1 for i in pool])
        kept = [lines[i] for i in chosen]
        evidence = [read[i] for i in chosen]  # what it read: all of it (the check picks what the answer rests on)
        read_note = {"segments_read": sum(len(groups[i][1]) for i in chosen)}
        note = "" if len(kept) == len(lines) else f"{len(kept)} of {len(lines)} segment descriptions fit the context"
        system = prompt(PROMPTS, "caption_only_system").render(memory_note=toolbox.memory_note).strip()

        def body(options: str) -> str:
            return toolbox.experience() + prompt(PROMPTS, "caption_only").render(
                captions="\n".join(kept), question=task.question, options=options).strip()

        orders = orders_for(self.choose_by, len(task.choices or ()))
        if orders and task.choices:  # in several orders the options are shown only where each order is scored
            scoring = body("" if orders > 1 else task.options_text())
            scores = score_options(model, [Message("system", system), Message("user", scoring)], task, trace, root.id,
                                   orders=orders)
            if scores is not None:
                scored = {"option_probabilities": [[round(p, 4) for p in order] for order in scores.per_order]}
                return run.answer(task.choices[scores.index], scores.index, step_id=len(trace) - 1,
                                  likelihood=round(scores.probabilities[scores.index], 4), evidence=evidence,
                                  artifacts={**read_note, **(scored if scores.per_order else {})})
        answer_format = prompt(PROMPTS, f"answer_format_{task.answer_type}").text.strip()
        request = body(task.options_text()) + "\n" + answer_prompt.render(answer_format=answer_format).strip()
        completion = model.chat([Message("system", system), Message("user", request)], max_tokens=answer_tokens,
                                stop=answer_prompt.stop, temperature=0.0)
        text = answer_line(completion.text)
        choice_index = extract_choice(text, task.choices) if task.choices else None
        step = trace.add(FinalAnswerStep(parent_id=root.id, thought=note, answer=text, model_output=completion.text,
                                         prompt_tokens=completion.prompt_tokens,
                                         completion_tokens=completion.completion_tokens,
                                         seconds=time.perf_counter() - started))
        return run.answer(task.answer_text(text, choice_index), choice_index, step_id=step.id, evidence=evidence,
                          artifacts=read_note)


@dataclass
class RandomPlanner:
    """Chance level: a uniformly random option; a random window for a time; no answer otherwise."""

    name: ClassVar[str] = "random"
    needs: ClassVar[Needs] = Needs(memory=False, llm=False)

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel, trace: Trace | None = None) -> Answer:
        run = Run.begin(self.name, task, toolbox, llm, trace)
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
        step = run.trace.add(FinalAnswerStep(parent_id=run.root.id, answer=text, how="random"))
        return run.answer(text, choice_index, step_id=step.id)


def line_groups(segments: Sequence[SegmentRecord], seconds: float) -> list[list[SegmentRecord]]:
    """Consecutive segments grouped into lines of ``seconds`` each (0: a line per segment)."""
    if seconds <= 0:
        return [[segment] for segment in segments]
    groups: list[list[SegmentRecord]] = []
    for segment in segments:
        if groups and segment.end_s - groups[-1][0].start_s <= seconds + 1e-6:
            groups[-1].append(segment)
        else:
            groups.append([segment])
    return groups


def estimated_tokens(text: str) -> int:
    """A prompt's size in tokens, estimated without the tokenizer: Qwen's and Llama 3's read every digit
    as a token (a time label like "[12.0-13.0 s]" is about 12), other text about ``CHARS_PER_TOKEN`` a token."""
    digits = sum(ch.isdigit() for ch in text)
    return digits + -(-(len(text) - digits) // int(CHARS_PER_TOKEN))


def fit_evenly(items: list[T], budget_chars: int, sizes: list[int] | None = None) -> list[T]:
    """All items if they fit, else an evenly spaced subset that does (first and last kept). ``sizes``
    gives each item's characters (default: a line's length and its newline)."""
    lengths = sizes if sizes is not None else [len(str(item)) + 1 for item in items]
    if sum(lengths) <= budget_chars or len(items) <= 2:
        return items
    mean = sum(lengths) / len(items)
    count = max(2, min(len(items), int(budget_chars / mean)))
    return [items[i] for i in stepped_indices(len(items), count)]


def answer_line(text: str) -> str:
    """The text after the last "Answer:" label, else the whole reply, on one line."""
    lowered = text.lower()
    at = lowered.rfind("answer:")
    found = text[at + len("answer:"):] if at >= 0 else text
    return " ".join(found.strip().strip('"').split())
