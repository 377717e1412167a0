"""Baselines that make a planner's gains measurable; planners like any other.

``caption_only``: every segment description in one prompt and one model call (as in LLoVi), or a few
chosen ones (``lines``, ``select``).
``blind``: the question and its options with no video at all, options scored: what the model knows
without looking (MVU's control), so that what the video adds can be told apart from it.
``random``: a uniformly random option (or window), seeded by the task id, with no model at all.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import ClassVar, Sequence, TypeVar

import numpy as np

from vidagent.agent.answer import Answer
from vidagent.agent.option_scoring import OptionScores, check_choose_by, choose, listed_options, resolved
from vidagent.agent.parsing import extract_choice
from vidagent.agent.planning import Needs, Run, option
from vidagent.agent.steps import FinalAnswerStep, Trace
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.errors import PlannerError
from vidagent.llm.base import ChatModel, Message
from vidagent.memory.store import SegmentRecord
from vidagent.prompts import prompt
from vidagent.tools.base import Evidence
from vidagent.tools.evidence_selection import check_select, shifted_grid
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
    ``prompts/caption_only.toml``; an option overrides it), ``choose_by`` (``auto``, the default: scored as
    below with the local model, by texts where the options are sentences and by numbers in every order otherwise;
    read off the generated answer with an endpoint; ``text``: the option the
    generated answer names; ``likelihood``: the option whose number the model finds likeliest,
    one generated token; ``permuted``: the same asked once per cyclic order of the options, averaged,
    so that a preference for a position cancels out), ``line_seconds`` (0: one line per segment; else
    consecutive segments share a line of that many seconds, so that short captions, e.g. one a second,
    are not outweighed by their time labels: a small model's tokenizer reads each digit as a token),
    ``lines`` (0: every line that fits; else at most that many, evenly spread, first and last kept: how
    well a few captions answer against all of them), ``select`` (which ``lines`` lines: ``even``, ``query``
    or ``mixed``, ``tools.evidence_selection``), ``samples`` (that many disjoint selections, each scored,
    their option probabilities averaged: self-consistency over evidence; needs a scored ``choose_by``)."""

    context_tokens: int | None = option(None, 256, 1_000_000)
    answer_tokens: int | None = option(None, 1, 4096)
    line_seconds: float = option(0.0, 0.0, 3600.0)
    lines: int = option(0, 0, 1000)
    choose_by: str = "auto"
    select: str = "even"
    samples: int = option(1, 1, 16)
    name: ClassVar[str] = "caption_only"

    def __post_init__(self) -> None:
        check_choose_by(self.choose_by)
        check_select(self.select)
        if not 1 <= self.samples <= 16:
            raise PlannerError("samples must be between 1 and 16 (evidence subsets scored and averaged)")
        if self.samples > 1 and self.choose_by == "text":
            raise PlannerError("samples > 1 averages scored options: use choose_by likelihood, permuted or "
                               "continuation")
        if self.line_seconds < 0:
            raise PlannerError("line_seconds must be 0 (a line per segment) or more")
        if self.lines < 0:
            raise PlannerError("lines must be 0 (every line that fits) or more")

    @property
    def needs(self) -> Needs:
        """Knowledge taken; with ``lines`` set and spread evenly (``select`` ``even``, a line a segment), it reads
        ``lines`` lines a selection whatever the question, ``lines * samples`` in all: all a glance need look at."""
        evenly = self.lines > 0 and self.select == "even" and self.line_seconds == 0
        return Needs(knowledge=True, lines_read=self.lines * self.samples if evenly else None)

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel, trace: Trace | None = None) -> Answer:
        run = Run.begin(self.name, task, toolbox, llm, trace)
        started = time.perf_counter()
        groups = [(source, group) for source, memory in toolbox.memories.items()  # a glance's unseen ones: no line
                  for group in line_groups([s for s in memory.segments if segment_text(s)], self.line_seconds)]
        read = [Evidence(group[0].start_s, group[-1].end_s, "; ".join(segment_text(s) for s in group), source)
                for source, group in groups]
        lines = [f"[{item.start_s:.1f}-{item.end_s:.1f} s] {item.text}" for item in read]
        context = self.context_tokens or toolbox.context_tokens
        answer_prompt = prompt(PROMPTS, "answer_line")
        answer_tokens = self.answer_tokens or answer_prompt.budget
        budget = context - PROMPT_RESERVE_TOKENS - answer_tokens
        subsets = self._subsets(task, toolbox, groups)
        system = prompt(PROMPTS, "caption_only_system").render(memory_note=toolbox.memory_note).strip()
        attached, consulted = read_attached(run)  # cited after the lines it read, never numbered among them

        def body(kept: list[str], options: str) -> str:
            return toolbox.experience() + attached + prompt(PROMPTS, "caption_only").render(
                captions="\n".join(kept), question=task.question, options=options).strip()

        def fitted(pool: list[int]) -> list[int]:
            return fit_evenly(pool, budget, [estimated_tokens(lines[i]) + 1 for i in pool])

        how = resolved(self.choose_by, task, run.llm)
        if task.choices and how != "text":
            scored = []
            for pool in subsets:
                chosen = fitted(pool)
                scoring = body([lines[i] for i in chosen], listed_options(task, how))
                scores = choose(run.llm, [Message("system", system), Message("user", scoring)], task, run.trace,
                                run.root.id, how)
                if scores is None:
                    break
                scored.append((chosen, scores))
            if scored:
                return self._scored_answer(run, task, scored, read, groups, consulted)
        chosen = fitted(subsets[0])
        kept = [lines[i] for i in chosen]
        note = "" if len(kept) == len(lines) else f"{len(kept)} of {len(lines)} segment descriptions fit the context"
        text, choice_index, step_id = written_answer(run, system, body(kept, task.options_text()), answer_tokens,
                                                     started, thought=note)
        return run.answer(task.answer_text(text, choice_index), choice_index, step_id=step_id,
                          evidence=[read[i] for i in chosen] + consulted,  # what it read (the check picks what counts)
                          artifacts={"segments_read": sum(len(groups[i][1]) for i in chosen)})

    def _subsets(self, task: Task, toolbox: Toolbox, groups: list[tuple[str, list[SegmentRecord]]]) -> list[list[int]]:
        """The lines each scoring reads: every line (``lines`` 0), or ``samples`` selections of ``lines``
        lines by the ``select`` rule."""
        everything = list(range(len(groups)))
        if self.lines == 0 or self.lines >= len(groups):
            return [everything]
        if self.select == "even" or toolbox.selector is None:
            return [shifted_grid(len(groups), self.lines, part, self.samples) for part in range(self.samples)]
        items = [np.stack([segment.embedding for segment in group]) for _, group in groups]
        return toolbox.selector.subsets(items, self.lines, self.select, task.question, task.choices, self.samples)

    def _scored_answer(self, run: Run, task: Task, scored: list[tuple[list[int], OptionScores]],
                       read: list[Evidence], groups: list[tuple[str, list[SegmentRecord]]],
                       consulted: list[Evidence]) -> Answer:
        """The option whose probability, averaged over the evidence subsets scored, is highest."""
        assert task.choices
        count = len(task.choices)
        mean = [sum(scores.probabilities[i] for _, scores in scored) / len(scored) for i in range(count)]
        index = max(range(count), key=lambda i: mean[i])
        chosen = sorted({i for pool, _ in scored for i in pool})
        artifacts: dict[str, object] = {"segments_read": sum(len(groups[i][1]) for i in chosen),
                                        "option_probabilities": [round(p, 4) for p in mean]}
        if len(scored) > 1:
            artifacts["subsets"] = [{"lines": pool, "probabilities": [round(p, 4) for p in scores.probabilities]}
                                    for pool, scores in scored]
        elif scored[0][1].per_order:
            artifacts["option_probabilities"] = [[round(p, 4) for p in order] for order in scored[0][1].per_order]
        if scored[0][1].mean_logprobs and len(scored) == 1:
            artifacts["mean_logprobs"] = list(scored[0][1].mean_logprobs)
        return run.answer(task.choices[index], index, step_id=len(run.trace) - 1, likelihood=round(mean[index], 4),
                          evidence=[read[i] for i in chosen] + consulted, artifacts=artifacts)


@dataclass
class BlindPlanner:
    """The question and its options, no video: options are scored (``choose_by``, default ``permuted``:
    the option numbers' probabilities in every cyclic order; ``continuation``: each option's text as
    the reply); an open question gets the model's guess."""

    choose_by: str = "permuted"
    answer_tokens: int | None = option(None, 1, 4096)
    name: ClassVar[str] = "blind"
    needs: ClassVar[Needs] = Needs(memory=False)

    def __post_init__(self) -> None:
        check_choose_by(self.choose_by)

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel, trace: Trace | None = None) -> Answer:
        run = Run.begin(self.name, task, toolbox, llm, trace)
        started = time.perf_counter()
        system = prompt(PROMPTS, "blind_system").text.strip()

        def body(options: str) -> str:
            return prompt(PROMPTS, "blind").render(question=task.question, options=options).strip()

        how = resolved(self.choose_by, task, run.llm)
        if task.choices and how != "text":
            scoring = body(listed_options(task, how))
            scores = choose(run.llm, [Message("system", system), Message("user", scoring)], task, run.trace,
                            run.root.id, how)
            if scores is not None:
                return run.answer(task.choices[scores.index], scores.index, step_id=len(run.trace) - 1,
                                  likelihood=round(scores.probabilities[scores.index], 4),
                                  artifacts={"option_probabilities": [round(p, 4) for p in scores.probabilities]})
        text, choice_index, step_id = written_answer(run, system, body(task.options_text()),
                                                     self.answer_tokens or prompt(PROMPTS, "answer_line").budget,
                                                     started)
        return run.answer(task.answer_text(text, choice_index), choice_index, step_id=step_id)


def written_answer(run: Run, system: str, body: str, answer_tokens: int, started: float,
                   thought: str = "") -> tuple[str, int | None, int]:
    """The model's reply to ``body`` closed by the ``answer_line`` request, read as the answer (the text after
    "Answer:", and the option it names), recorded as a final answer: (text, option index, step id)."""
    task = run.task
    answer_prompt = prompt(PROMPTS, "answer_line")
    answer_format = prompt(PROMPTS, f"answer_format_{task.answer_type}").text.strip()
    request = body + "\n" + answer_prompt.render(answer_format=answer_format).strip()
    completion = run.llm.chat([Message("system", system), Message("user", request)], max_tokens=answer_tokens,
                              stop=answer_prompt.stop, temperature=0.0)
    text = answer_line(completion.text)
    choice_index = extract_choice(text, task.choices) if task.choices else None
    step = run.trace.add(FinalAnswerStep(parent_id=run.root.id, thought=thought, answer=text,
                                         model_output=completion.text, prompt_tokens=completion.prompt_tokens,
                                         completion_tokens=completion.completion_tokens,
                                         seconds=time.perf_counter() - started))
    return text, choice_index, step.id


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


def read_attached(run: Run) -> tuple[str, list[Evidence]]:
    """Each knowledge source the user attached asked the question (recorded as an automatic tool call),
    as a prompt section per source, and what they cite: a planner that offers no tools still reads them."""
    sections: list[str] = []
    evidence: list[Evidence] = []
    for name in run.toolbox.attached:
        if name not in run.toolbox.tools:
            continue
        _, observation = run.toolbox.call_recorded(run.trace, run.llm.usage, run.root.id, name,
                                                   {"question": run.task.question}, automatic=True,
                                                   thought=f"(the user attached {name}: read for the question)")
        sections.append(prompt(PROMPTS, "caption_only_knowledge").render(source=name, text=observation.text).strip()
                        + "\n\n")
        evidence.extend(observation.evidence)
    return "".join(sections), evidence


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
