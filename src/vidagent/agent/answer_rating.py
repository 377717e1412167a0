"""How likely an open answer is right, asked of the model (issue 51): the question, the proposed answer and the
evidence the answer cites, and the probability the model gives to "yes" against "no" as its first word.

A multiple-choice answer has its options' probabilities from the planner; an open answer (a count, a time, a few
words) had no measure at all. One short call gives it one: P(yes) is the answer's rating, kept in
``answer.artifacts["rating"]``, and ``agent.calibration`` maps it to a probability of being right. The lines read
are those the check would re-read (``evidence_check.spans_to_read``). A backend without log-probabilities, or a
budget already spent, leaves the answer unrated (its confidence then stays unmeasured).
"""

from __future__ import annotations

import logging
import time

from vidagent.agent.answer import Answer
from vidagent.agent.evidence_check import evidence_lines, record_evaluation, spans_to_read
from vidagent.agent.option_scoring import TOP_LOGPROBS, yes_probability
from vidagent.config import ToolShapes
from vidagent.errors import LLMError
from vidagent.llm.base import ChatModel, Message
from vidagent.llm.budget import BudgetSpentError
from vidagent.prompts import prompt

PROMPTS = "vidagent.agent"
NO_EVIDENCE = "(nothing: the answer cites no line of the memory)"

logger = logging.getLogger(__name__)


def needs_rating(answer: Answer) -> bool:
    """An open answer with text that did not abstain: the only kind a planner leaves without a measure."""
    return not answer.task.choices and not answer.abstained and bool(answer.text.strip())


def rate_answer(answer: Answer, llm: ChatModel, shapes: ToolShapes | None = None) -> float | None:
    """P(yes) that ``answer`` is right on the evidence it cites, recorded in its trace and artifacts; None where
    it needs no rating (``needs_rating``), the backend gives no log-probabilities, or the call failed."""
    if not needs_rating(answer) or not getattr(llm, "returns_logprobs", False):
        return None
    shapes = shapes or ToolShapes()
    shown = [answer.evidence[i] for i in spans_to_read(answer, shapes.check_spans)]
    template = prompt(PROMPTS, "answer_rating")
    request = template.render(evidence=evidence_lines(shown, shapes.check_span_chars) if shown else NO_EVIDENCE,
                              question=answer.question, answer=answer.text.strip()).strip()
    messages = [Message("system", prompt(PROMPTS, "answer_rating_system").text.strip()), Message("user", request)]
    started = time.perf_counter()
    try:
        completion = llm.chat(messages, max_tokens=template.budget, temperature=0.0, top_logprobs=TOP_LOGPROBS)
    except (LLMError, BudgetSpentError) as error:
        logger.info("the answer was not rated: %s", error)
        return None
    rating = yes_probability(completion.first_token_logprobs)
    if rating is None:
        return None
    record_evaluation(answer, f"Rated: P(yes) {rating:.2f} that the answer is right on the {len(shown)} line(s) it "
                      "cites.", round(rating, 4), completion.text, started, completion)
    answer.artifacts["rating"] = round(rating, 4)
    return rating
