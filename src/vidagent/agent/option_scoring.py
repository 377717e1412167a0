"""Multiple choice by likelihood: the model's probability for each option's number as the first
token of its reply, instead of parsing an option out of generated text (the way evaluation
harnesses score choices). One call, one generated token, the prompt's prefix shared with the
conversation it follows (a local model reuses its KV cache for it).

``permuted`` asks once per cyclic order of the options (each order shifts them one place) and
averages each option's probability over the orders: a small model's preference for a position
then weighs on every option alike (on 100 NExT-QA development questions the 1.5B default chose the
last of five options 39-42 times, where the key has it 24 times). The orders share everything before
the options, so each costs only the options it reads and one token.

``continuation`` scores each option's *text* instead: the option is held as the model's reply and
its tokens' log-probabilities are read (``ChatModel.scores_continuations``), averaged over its tokens
so that a long option is not penalised for its length; the options are never shown, so there is no
position to prefer, and everything before the reply is read once (the options' calls share it). They are scored in
sorted order, so that options that begin alike follow one another: the embedded model reads the start an option
shares with the one before from its KV cache instead of forcing it again (``vidagent.llm.local.ScoredReply``).

A backend that returns no log-probabilities, or whose likeliest tokens name no option, gives
``None``: the caller falls back to reading the generated answer.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Sequence

from vidagent.agent.steps import EvaluationStep, FinalAnswerStep, Trace, model_cost
from vidagent.agent.task import Task, options_text
from vidagent.errors import PlannerError
from vidagent.llm.base import ChatModel, Message
from vidagent.llm.budget import BudgetSpentError
from vidagent.prompts import prompt

PROMPTS = "vidagent.agent"
TOP_LOGPROBS = 20
CHOOSE_BY = ("text", "likelihood", "permuted", "continuation", "auto")
SENTENCE_WORDS = 6
"""``auto`` scores option texts when the options average this many words or more (sentences, as EgoSchema's:
median 12.4 words, 10th percentile 7.8) and option numbers in every order otherwise (short phrases, as NExT-QA's:
at most 5.2; there the texts scored 45 of 100 against 63 by numbers, on EgoSchema 48 against 34)."""


def check_choose_by(value: str) -> None:
    """A planner's ``choose_by`` option must name a way to choose."""
    if value not in CHOOSE_BY:
        raise PlannerError(f"choose_by must be one of {', '.join(CHOOSE_BY)}, got {value!r}")


@dataclass(frozen=True)
class OptionScores:
    """The chosen option and each option's probability (renormalised over the options; with several
    orders, the mean over them), and each order's own probabilities, by option as given."""

    index: int
    probabilities: tuple[float, ...]
    per_order: tuple[tuple[float, ...], ...] = ()
    mean_logprobs: tuple[float, ...] = ()  # ``continuation``: each option's tokens' mean log-probability


def orders_for(choose_by: str, count: int) -> int:
    """How many orders of ``count`` options a way of choosing asks about (0: it reads generated text or,
    for ``continuation``, shows no options)."""
    return {"likelihood": 1, "permuted": count}.get(choose_by, 0)


def resolved(choose_by: str, task: Task, llm: ChatModel) -> str:
    """``auto`` made concrete for this question and model. A model that scores a given reply (the local one, whose
    log-probabilities are read in-process) has the options scored: ``continuation`` where they are sentences, else
    ``permuted``. An endpoint that returns log-probabilities (``returns_logprobs``: llama.cpp's server, vLLM) has
    them scored by their numbers in every order (``permuted``): it cannot score a given reply. Any other reads the
    generated answer (``text``), as the papers did. Any other way is itself."""
    if choose_by != "auto":
        return choose_by
    if not getattr(llm, "scores_continuations", False):
        return "permuted" if task.choices and getattr(llm, "returns_logprobs", False) else "text"
    words = [len(choice.split()) for choice in task.choices or ()]
    sentences = bool(words) and sum(words) / len(words) >= SENTENCE_WORDS
    return "continuation" if sentences else "permuted"


def listed_options(task: Task, choose_by: str) -> str:
    """The options as the prompt before the scoring lists them: where one order is scored (``likelihood``);
    none where each of several orders lists them itself (``permuted``) or they are scored unseen
    (``continuation``)."""
    return task.options_text() if choose_by == "likelihood" else ""


def choose(llm: ChatModel, messages: Sequence[Message], task: Task, trace: Trace, parent_id: int,
           choose_by: str, *, judging: bool = False) -> OptionScores | None:
    """The options scored after ``messages`` the way ``choose_by`` says (None: read a generated
    answer instead, or the backend cannot score)."""
    choose_by = resolved(choose_by, task, llm)
    if not task.choices or choose_by == "text":
        return None
    if choose_by == "continuation":
        return score_option_texts(llm, messages, task, trace, parent_id, judging=judging)
    return score_options(llm, messages, task, trace, parent_id, orders=orders_for(choose_by, len(task.choices)),
                         judging=judging)


def choose_among(llm: ChatModel, messages: Sequence[Message], task: Task, among: Sequence[int], trace: Trace,
                 parent_id: int, choose_by: str = "auto") -> OptionScores | None:
    """``choose`` restricted to the options ``among`` (indices into ``task.choices``), as the guards decide
    again once an option is excluded: the result names the original options (those left out get probability 0).
    One option left is chosen with no call; None where the backend cannot score (read a generated answer)."""
    count = len(task.choices or ())
    kept = sorted(set(among))
    if not kept:
        return None
    if len(kept) == 1:
        return OptionScores(kept[0], tuple(1.0 if i == kept[0] else 0.0 for i in range(count)))
    narrowed = replace(task, choices=tuple(task.choices[i] for i in kept))  # type: ignore[index]
    scores = choose(llm, messages, narrowed, trace, parent_id, choose_by)
    if scores is None:
        return None
    probabilities = [0.0] * count
    for position, index in enumerate(kept):
        probabilities[index] = scores.probabilities[position]
    return OptionScores(kept[scores.index], tuple(probabilities))  # the narrowed options' means would misname them


def score_option_texts(llm: ChatModel, messages: Sequence[Message], task: Task, trace: Trace, parent_id: int,
                       *, judging: bool = False) -> OptionScores | None:
    """Each option's text scored as the reply to ``messages`` and the ``option_text`` request: its
    tokens' mean log-probability; the probabilities are those means' softmax over the options. None
    when the model cannot score a given reply."""
    if not task.choices or not getattr(llm, "scores_continuations", False):
        return None
    asked = prompt(PROMPTS, "option_text").text.strip()
    conversation = [*messages, Message("user", asked)]
    means = [-math.inf] * len(task.choices)
    # in the options' sorted order, each next to the one sharing its start most: a model that keeps the tokens
    # shared with the option before reads them once (``LocalGGUFBackend``)
    for scored, index in enumerate(sorted(range(len(task.choices)), key=lambda i: task.choices[i])):  # type: ignore[index]
        choice = task.choices[index]
        started = time.perf_counter()
        try:
            completion = llm.chat(conversation, max_tokens=0, temperature=0.0, continuation=choice)
        except BudgetSpentError:
            if not scored:
                raise
            return None  # a budget spent mid-way leaves options unscored: no fair choice among them
        logprobs = completion.token_logprobs
        mean = sum(logprobs) / len(logprobs) if logprobs else -math.inf
        means[index] = mean
        note = f"(option {index}: mean log-probability {mean:.3f} over {len(logprobs)} tokens)"
        cost = model_cost(completion, started)
        trace.add(EvaluationStep(parent_id=parent_id, text=note, score=mean, model_output=choice, **cost) if judging
                  else FinalAnswerStep(parent_id=parent_id, thought=note, answer=choice, how="continuation",
                                       model_output=choice, **cost))
    if not any(math.isfinite(m) for m in means):
        return None
    return OptionScores(max(range(len(means)), key=lambda i: means[i]), normalised(means),
                        mean_logprobs=tuple(round(m, 4) for m in means))


def cyclic_orders(count: int, orders: int) -> list[tuple[int, ...]]:
    """``orders`` arrangements of ``count`` options (at most ``count``), each the one before shifted by one
    place; the first is the options as given. Each lists the original option index at every position."""
    return [tuple((position + shift) % count for position in range(count)) for shift in range(min(orders, count))]


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
    return normalised([best.get(i, -math.inf) for i in range(count)])


def normalised(logprobs: Sequence[float]) -> tuple[float, ...]:
    """Log-probabilities (at least one finite; -inf for none) as probabilities summing to 1 (a softmax)."""
    top = max(logprobs)
    weights = [math.exp(value - top) if math.isfinite(value) else 0.0 for value in logprobs]
    total = sum(weights)
    return tuple(weight / total for weight in weights)


def score_options(llm: ChatModel, messages: Sequence[Message], task: Task, trace: Trace,
                  parent_id: int, *, orders: int = 1, judging: bool = False) -> OptionScores | None:
    """Ask which option is correct after ``messages`` and read the option numbers' probabilities;
    each call is recorded as a ``FinalAnswerStep`` (``how="likelihood"``), or with ``judging`` (the
    scores judge the evidence so far, as TraveLER's evaluator does) an ``EvaluationStep`` scored with
    the leading option's probability. ``orders`` > 1 asks again
    with the options in the next cyclic order (see ``cyclic_orders``) and averages; a budget spent
    after the first order ends the asking with the orders read so far."""
    if not task.choices:
        return None
    which = prompt(PROMPTS, "option_number")
    count = len(task.choices)
    per_order: list[tuple[float, ...]] = []
    for shift, order in enumerate(cyclic_orders(count, orders)):
        started = time.perf_counter()
        request = which.render(options=options_text([task.choices[i] for i in order])).strip()
        try:
            completion = llm.chat([*messages, Message("user", request)], max_tokens=which.budget, stop=which.stop,
                                  temperature=0.0, top_logprobs=TOP_LOGPROBS)
        except BudgetSpentError:
            if not per_order:
                raise
            break
        at_positions = option_probabilities(completion.first_token_logprobs, count)
        shifted = f", options shifted {shift}" if shift else ""
        cost = model_cost(completion, started)
        if at_positions is None:
            note = f"(no option number among the likeliest tokens{shifted})"
            trace.add(EvaluationStep(parent_id=parent_id, text=note, model_output=completion.text, **cost) if judging
                      else FinalAnswerStep(parent_id=parent_id, thought=note, answer=completion.text.strip(),
                                           how="likelihood", model_output=completion.text, **cost))
            if not completion.first_token_logprobs:
                break  # the backend gives no log-probabilities: another order would not either
            continue
        by_option = [0.0] * count
        for position, option in enumerate(order):
            by_option[option] = at_positions[position]
        per_order.append(tuple(by_option))
        best = max(range(count), key=lambda i: by_option[i])
        shown = ", ".join(f"{i}: {p:.2f}" for i, p in enumerate(by_option))
        note = f"(option probabilities {shown}{shifted})"
        trace.add(EvaluationStep(parent_id=parent_id, text=note, score=by_option[best], model_output=completion.text,
                                 **cost) if judging
                  else FinalAnswerStep(parent_id=parent_id, thought=note, answer=task.choices[best], how="likelihood",
                                       model_output=completion.text, **cost))
    if not per_order:
        return None
    mean = tuple(sum(order[i] for order in per_order) / len(per_order) for i in range(count))
    index = max(range(count), key=lambda i: mean[i])
    return OptionScores(index, mean, tuple(per_order) if orders > 1 else ())


def yes_probability(logprobs: Sequence[tuple[str, float]]) -> float | None:
    """P(yes) against P(no) from first-token log-probabilities ("Yes", " yes", "no"...); None when neither is
    among them."""
    best = {"yes": -math.inf, "no": -math.inf}
    for token, logprob in logprobs:
        word = token.strip().lower()
        if word in best:
            best[word] = max(best[word], logprob)
    if not any(math.isfinite(value) for value in best.values()):
        return None
    top = max(best.values())
    weights = {word: math.exp(value - top) if math.isfinite(value) else 0.0 for word, value in best.items()}
    return weights["yes"] / (weights["yes"] + weights["no"])
