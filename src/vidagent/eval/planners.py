"""Planners the runner can evaluate: a registry of ``name -> callable(session, item) -> Answer``.

Built in: ``react`` (the session's ReAct agent), and two baselines that make gains measurable:
``random`` (a uniformly random option, seeded by the question id, no model calls) and
``caption_only`` (every segment description in one prompt and one LLM call, as in LLoVi).
Other planners plug in with ``@register_planner("name")``, or by naming ``module:function`` on
the command line. A planner gets the item with ``item.video_path`` set and may only use the
public ``Session`` API (``ask``, ``index``, ``llm``).
"""

from __future__ import annotations

import hashlib
import importlib
import random
import time
from typing import Callable, Protocol

from vidagent.agent.answer import Answer, Step
from vidagent.agent.parsing import extract_choice
from vidagent.eval.dataset import LOCALIZATION, MULTIPLE_CHOICE, EvalItem
from vidagent.eval.errors import EvalError
from vidagent.llm.base import Message
from vidagent.llm.metered import MeteredChat
from vidagent.memory.video_memory import VideoMemory
from vidagent.prompts import load_prompt, render
from vidagent.session import Session
from vidagent.video.video import Video


class Planner(Protocol):
    def __call__(self, session: Session, item: EvalItem) -> Answer: ...


_PLANNERS: dict[str, Callable[[Session, EvalItem], Answer]] = {}
# Planners that never call a model: the runner does not load one for them.
MODEL_FREE = {"random"}


def register_planner(name: str) -> Callable[[Callable[[Session, EvalItem], Answer]], Callable[[Session, EvalItem], Answer]]:
    """Decorator: make a planner available to ``vidagent eval --planner NAME``."""

    def add(function: Callable[[Session, EvalItem], Answer]) -> Callable[[Session, EvalItem], Answer]:
        _PLANNERS[name] = function
        return function

    return add


def planner_names() -> list[str]:
    return sorted(_PLANNERS)


def get_planner(name: str) -> Callable[[Session, EvalItem], Answer]:
    """A registered planner, or ``package.module:function`` imported on demand."""
    if name in _PLANNERS:
        return _PLANNERS[name]
    if ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            function = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as error:
            raise EvalError(f"cannot load planner {name!r}: {error}") from None
        if not callable(function):
            raise EvalError(f"planner {name!r} is not callable")
        return function  # type: ignore[no-any-return]
    raise EvalError(f"unknown planner {name!r}: use one of {', '.join(planner_names())} or module:function")


def _video(item: EvalItem) -> str:
    if not item.video_path:
        raise EvalError(f"question {item.id} has no video file")
    return item.video_path


# -- react ---------------------------------------------------------------------------------------
@register_planner("react")
def react(session: Session, item: EvalItem) -> Answer:
    """The ReAct agent over the video memory (``Session.ask``)."""
    answer = session.ask(_video(item), item.question, list(item.choices) if item.choices else None)
    answer.planner = "react"
    return answer


# -- random ----------------------------------------------------------------------------------------
def question_seed(item: EvalItem) -> int:
    """A seed that depends only on the question id (the same in every process and run)."""
    return int.from_bytes(hashlib.sha256(item.id.encode()).digest()[:8], "big")


@register_planner("random")
def random_choice(session: Session, item: EvalItem) -> Answer:
    """Chance level: a uniformly random option; a random window for localization; no answer otherwise."""
    del session
    rng = random.Random(question_seed(item))
    if item.task == MULTIPLE_CHOICE and item.choices:
        index = rng.randrange(len(item.choices))
        return Answer(question=item.question, text=item.choices[index], choices=list(item.choices),
                      choice_index=index, planner="random")
    if item.task == LOCALIZATION:
        duration = Video(_video(item)).duration_s
        start = rng.uniform(0.0, max(0.0, duration - 2.0))
        end = min(duration, start + rng.uniform(1.0, max(1.0, duration / 4)))
        return Answer(question=item.question, text=f"{start:.1f} - {end:.1f}", planner="random")
    return Answer(question=item.question, text="", planner="random")


# -- caption only (LLoVi-style) ------------------------------------------------------------------------
CAPTION_ANSWER_TOKENS = 60
CHARS_PER_TOKEN = 3.0
PROMPT_RESERVE_TOKENS = 600


def _memory_note(session: Session) -> str:
    """The note the ReAct agent gets about offline descriptions, so both see the same caveat."""
    try:
        from vidagent.perception.vqa import DescribedFramesVQA
        from vidagent.session import OFFLINE_MEMORY_NOTE

        return OFFLINE_MEMORY_NOTE if isinstance(session.vqa, DescribedFramesVQA) else ""
    except (ImportError, AttributeError):
        return ""


@register_planner("caption_only")
def caption_only(session: Session, item: EvalItem) -> Answer:
    """All segment descriptions in one prompt, one LLM call (uniformly thinned to fit the context)."""
    started = time.perf_counter()
    memory = _temporal_memory(session, _video(item))
    lines = [f"[{s.start_s:.1f}-{s.end_s:.1f} s] {s.as_text()}" for s in memory.segments]
    budget = int((session.settings.llm.context_tokens - PROMPT_RESERVE_TOKENS - CAPTION_ANSWER_TOKENS) * CHARS_PER_TOKEN)
    kept = _fit(lines, budget)
    if item.task == MULTIPLE_CHOICE and item.choices:
        answer_format = load_prompt("vidagent.eval", "answer_format_choice").strip()
        options = "\nOptions:\n" + "\n".join(f"{i}. {c}" for i, c in enumerate(item.choices))
    else:
        name = "answer_format_time" if item.task == LOCALIZATION else "answer_format_open"
        answer_format, options = load_prompt("vidagent.eval", name).strip(), ""
    system = render(load_prompt("vidagent.eval", "caption_only_system"), memory_note=_memory_note(session)).strip()
    prompt = render(load_prompt("vidagent.eval", "caption_only"), captions="\n".join(kept), question=item.question,
                    options=options, answer_format=answer_format).strip()
    llm = MeteredChat(session.llm)
    completion = llm.chat([Message("system", system), Message("user", prompt)], max_tokens=CAPTION_ANSWER_TOKENS,
                          temperature=0.0)
    text = _answer_line(completion.text)
    choice_index = extract_choice(text, item.choices) if item.choices else None
    note = "" if len(kept) == len(lines) else f"{len(kept)} of {len(lines)} segment descriptions fit the context"
    step = Step(index=0, thought=note, action="final_answer", action_input=text, observation="",
                model_output=completion.text, prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens, seconds=time.perf_counter() - started)
    return Answer(
        question=item.question, text=item.choices[choice_index] if item.choices and choice_index is not None else text,
        choices=list(item.choices) if item.choices else None, choice_index=choice_index, trace=[step],
        usage=llm.usage, video=str(memory.video.path), video_id=memory.video_id, planner="caption_only",
    )


def _temporal_memory(session: Session, video: str) -> VideoMemory:
    """The video's segments; with a staged memory, only the stages segments need (no object memory)."""
    try:
        from vidagent.memory.builder import TEMPORAL_STAGES
    except ImportError:  # a memory without stages
        return session.index(video, progress=False)
    return session.index(video, TEMPORAL_STAGES, progress=False)  # type: ignore[call-arg]


def _fit(lines: list[str], budget_chars: int) -> list[str]:
    """All lines if they fit, else an evenly spaced subset that does (first and last kept)."""
    if sum(len(line) + 1 for line in lines) <= budget_chars or len(lines) <= 2:
        return lines
    mean = sum(len(line) + 1 for line in lines) / len(lines)
    count = max(2, min(len(lines), int(budget_chars / mean)))
    step = (len(lines) - 1) / (count - 1)
    return [lines[round(i * step)] for i in range(count)]


def _answer_line(text: str) -> str:
    """The text after the last "Answer:" label, else the whole reply, on one line."""
    lowered = text.lower()
    at = lowered.rfind("answer:")
    found = text[at + len("answer:"):] if at >= 0 else text
    return " ".join(found.strip().strip('"').split())
