"""The check (issue 23, item 1): does the evidence an answer cites support it?

After the planner answers, the model re-reads only what the answer cites (its evidence spans, at most
``ToolShapes.check_spans`` of them, ``check_span_chars`` characters of each: those that share the most rare
words with the question and the answer) and is asked two things on that text alone: which option is right
(the options' probabilities, where the backend gives log-probabilities), and which numbered lines show that
the answer is right. Both requests follow the
same numbered evidence, so a local model reads it once (its KV cache keeps the prefix).

The verdict, for multiple choice with the options' probabilities: ``supported`` when the chosen option is
the likeliest on the cited evidence, whatever lines are named (replayed with the embedded 1.5B model on 100
NExT-QA react answers, bench/check_replay.py: it named a supporting line for every answer, right or wrong,
so lines alone never abstain; its option comparison agreed with half the answers, 44 % of them right against
36 % of the other half); otherwise (an open answer, a backend without
log-probabilities, one call left), ``supported`` when at least one line is named. An unsupported answer
abstains with the reason, its guess kept (a multiple-choice benchmark still scores it). Each evidence item gets ``supports``: True (named),
False (re-read, not named), None (not re-read). The check's option probability is the answer's confidence
where the planner has none of its own. Both steps are recorded in the trace as evaluations.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import replace
from typing import Any, Sequence

from vidagent.agent.answer import Answer, Check
from vidagent.agent.option_scoring import TOP_LOGPROBS, option_probabilities
from vidagent.agent.steps import EvaluationStep, model_cost
from vidagent.config import ToolShapes
from vidagent.llm.budget import BudgetSpentError
from vidagent.llm.metered import MeteredChat
from vidagent.llm.base import Message
from vidagent.prompts import prompt
from vidagent.text import fold
from vidagent.tools.base import Evidence

PROMPTS = "vidagent.agent"
MIN_WORD = 3  # shorter words say nothing about which span is meant
_NUMBER = re.compile(r"\d+")


def check_answer(answer: Answer, llm: MeteredChat, shapes: ToolShapes | None = None) -> Answer:
    """``answer`` with its check: evidence marked ``supports``, ``answer.check`` set, and abstained with
    the reason when nothing it cites supports it. An answer that already abstained, or has no text, is
    left as it is; a budget spent before or during the check leaves it unchecked (said so). ``shapes``
    (the settings' ``tools``; None: the defaults) says how much evidence is re-read."""
    shapes = shapes or ToolShapes()
    if answer.abstained or not answer.text.strip():
        return answer
    if llm.calls_left() == 0:
        return _with(answer, Check((), (), None, "not checked: the question's budget is spent"))
    read = spans_to_read(answer, shapes.check_spans)
    if not read:
        check = Check((), (), None, "no evidence")
        record_evaluation(answer, "The answer cites nothing read from a memory to check it against.", None, "", 0.0)
        return _with(answer, check, "the answer cites no evidence from the video")
    try:
        check = _judge(answer, read, llm, shapes.check_span_chars)
    except BudgetSpentError as spent:
        return _with(answer, Check(tuple(read), (), None, f"not checked: {spent}"))
    reason = "" if check.supported else _unsupported_reason(check, answer.choice_index)
    return _with(answer, check, reason)


def spans_to_read(answer: Answer, limit: int) -> list[int]:
    """The evidence items the check re-reads (indices, in the evidence's order): those with text, and of
    more than ``limit`` the ones sharing the rarest words with the question and the answer."""
    texts = {i: item.text for i, item in enumerate(answer.evidence) if item.text.strip()}
    if len(texts) <= limit:
        return sorted(texts)
    words = {i: set(_words(text)) for i, text in texts.items()}
    seen_in = Counter(word for found in words.values() for word in found)
    wanted = set(_words(f"{answer.question} {answer.text}"))
    weight = {word: math.log(1 + len(texts) / seen_in[word]) for word in wanted if seen_in[word]}
    score = {i: sum(weight.get(word, 0.0) for word in found) for i, found in words.items()}
    best = sorted(texts, key=lambda i: (-score[i], i))[:limit]
    return sorted(best)


def evidence_lines(evidence: Sequence[Evidence], chars: int) -> str:
    """The numbered lines the check shows (1-based): where each item is, and its text (``chars`` of it)."""
    lines = []
    for number, item in enumerate(evidence, start=1):
        where = item.where or f"{item.start_s:.1f}-{item.end_s:.1f} s"
        text = " ".join(item.text.split())
        lines.append(f"[{number}] {where}: {text[:chars]}")
    return "\n".join(lines)


def supporting_lines(reply: str, count: int) -> tuple[int, ...]:
    """The line numbers (0-based) a reply names, among ``count``; none for "none"."""
    said = reply.split(":", 1)[1] if ":" in reply else reply
    if "none" in said.lower()[:12]:
        return ()
    found = [int(n) - 1 for n in _NUMBER.findall(said)]
    return tuple(sorted({n for n in found if 0 <= n < count}))


def _judge(answer: Answer, read: list[int], llm: MeteredChat, chars: int) -> Check:
    task = answer.task
    shown = [answer.evidence[i] for i in read]
    context = prompt(PROMPTS, "check_evidence").render(evidence=evidence_lines(shown, chars), question=task.question,
                                                       options=task.options_text()).strip()
    probabilities = None
    if task.choices and llm.calls_left() != 1:  # with one call left, the judgement of support comes first
        which = prompt(PROMPTS, "option_number")
        started = time.perf_counter()
        completion = llm.chat([Message("user", context + "\n\n" + which.render(options="").strip())],
                              max_tokens=which.budget, stop=which.stop, temperature=0.0, top_logprobs=TOP_LOGPROBS)
        probabilities = option_probabilities(completion.first_token_logprobs, len(task.choices))
        if probabilities is not None:
            shown_p = ", ".join(f"{i}: {p:.2f}" for i, p in enumerate(probabilities))
            chosen = answer.choice_index
            record_evaluation(answer, f"On the cited evidence alone, the options' probabilities are {shown_p}"
                    + (f" (the answer's option {chosen}: {probabilities[chosen]:.2f})." if chosen is not None else "."),
                    probabilities[chosen] if chosen is not None else None, completion.text, started, completion)
    support = prompt(PROMPTS, "check_support")
    started = time.perf_counter()
    completion = llm.chat([Message("user", context + "\n\n" + support.render(answer=answer.text).strip())],
                          max_tokens=support.budget, stop=support.stop, temperature=0.0)
    named = supporting_lines(completion.text, len(read))
    supporting = tuple(read[n] for n in named)
    said = (f"lines {', '.join(str(n + 1) for n in named)} of {len(read)} re-read support the answer" if named
            else f"no line of the {len(read)} re-read supports the answer")
    if probabilities is not None and answer.choice_index is not None:
        likeliest = max(range(len(probabilities)), key=lambda i: (probabilities[i], i == answer.choice_index))
        supported = likeliest == answer.choice_index
        said += "; its option is the likeliest on them" if supported else \
            f"; option {likeliest} is likelier on them ({probabilities[likeliest]:.2f})"
    else:
        supported = bool(supporting)
    verdict = "supported" if supported else "unsupported"
    record_evaluation(answer, f"Check: {said}; {verdict}.", 1.0 if supported else 0.0, completion.text, started, completion)
    return Check(tuple(read), supporting, probabilities, verdict)


def _unsupported_reason(check: Check, choice_index: int | None) -> str:
    if check.probabilities is not None and choice_index is not None:
        return "on the evidence it cites, another option is likelier than the answer"
    return "none of the evidence it cites shows that the answer is right"


def record_evaluation(answer: Answer, text: str, score: float | None, output: str, started: float,
                      completion: Any = None) -> None:
    """An evaluation step after the answer's last step, with the model call's cost where there was one."""
    last = answer.trace.last
    cost = model_cost(completion, started) if completion is not None else {}
    answer.trace.add(EvaluationStep(parent_id=last.id if last else None, text=text, score=score,
                                    model_output=output, **cost))


def _with(answer: Answer, check: Check, abstain: str = "") -> Answer:
    supporting = set(check.supporting)
    read = set(check.read)
    evidence = [replace(item, supports=(i in supporting) if i in read else None)
                for i, item in enumerate(answer.evidence)]
    return replace(answer, evidence=evidence, check=check, abstained=abstain or answer.abstained)


def _words(text: str) -> list[str]:
    return [word for word in re.findall(r"\w+", fold(text)) if len(word) >= MIN_WORD]
