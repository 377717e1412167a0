"""An open answer rated by the model: P(yes) that it is right on the evidence it cites."""

from __future__ import annotations

import math

import pytest

from vidagent.agent.answer import Answer
from vidagent.agent.answer_rating import rate_answer
from vidagent.agent.steps import EvaluationStep, Trace
from vidagent.agent.task import Question, Source
from vidagent.llm.base import Completion
from vidagent.llm.budget import Budget
from vidagent.llm.metered import MeteredChat
from vidagent.tools.base import Evidence

from fakes import ScriptedLLM

SPANS = [Evidence(0.0, 2.0, "a man draws the neck of a guitar", "v1")]


def _answer(choices=None, text="a guitar") -> Answer:
    task = Question("What does the man draw?", choices).about((Source("v1", "video", "/videos/v1.mp4"),))
    return Answer(task=task, text=text, planner="caption_only", choice_index=0 if choices else None,
                  evidence=list(SPANS), trace=Trace())


def _yes(p: float) -> Completion:
    return Completion(text="yes", prompt_tokens=30, completion_tokens=1, seconds=0.01,
                      first_token_logprobs=(("yes", math.log(p)), ("no", math.log(1 - p))))


def test_an_open_answer_gets_the_probability_of_yes_in_one_call_with_its_evidence():
    llm = ScriptedLLM([_yes(0.8)], scores_continuations=True)
    answer = _answer()
    assert rate_answer(answer, MeteredChat(llm)) == 0.8
    assert answer.artifacts["rating"] == 0.8 and answer.measured_confidence == 0.8
    asked = llm.requests[0][-1].content
    assert "neck of a guitar" in asked and "Proposed answer: a guitar" in asked
    assert llm.sampling[0]["top_logprobs"] > 0 and llm.sampling[0]["max_tokens"] == 1
    assert isinstance(answer.trace.last, EvaluationStep) and answer.trace.last.score == 0.8


def test_no_rating_where_the_planner_measured_or_the_model_cannot_say():
    chosen = _answer(choices=("a guitar", "a car"))
    assert rate_answer(chosen, MeteredChat(ScriptedLLM([], scores_continuations=True))) is None
    text_only = ScriptedLLM([])  # no log-probabilities: no call at all
    assert rate_answer(_answer(), MeteredChat(text_only)) is None and not text_only.requests
    unreadable = Completion(text="maybe", prompt_tokens=30, completion_tokens=1, seconds=0.01,
                            first_token_logprobs=(("maybe", -0.1),))
    answer = _answer()
    assert rate_answer(answer, MeteredChat(ScriptedLLM([unreadable], scores_continuations=True))) is None
    assert "rating" not in answer.artifacts


def test_a_spent_budget_leaves_the_answer_unrated():
    llm = ScriptedLLM(["first", _yes(0.9)], scores_continuations=True)
    metered = MeteredChat(llm, budget=Budget(calls=1))
    metered.chat([])
    answer = _answer()
    assert rate_answer(answer, metered) is None
    assert len(llm.requests) == 1 and "rating" not in answer.artifacts


@pytest.mark.models
def test_the_embedded_model_rates_an_answer_its_evidence_shows_above_one_it_contradicts():
    from vidagent.config import Settings
    from vidagent.llm.client import LLM
    from vidagent.llm.local import LocalGGUFBackend
    from vidagent.models.install import model_path

    backend = LocalGGUFBackend(model_path("qwen2.5-1.5b", Settings.from_env().models_dir), context_tokens=2048)
    llm = MeteredChat(LLM(backend))
    shown = rate_answer(_answer(text="a guitar"), llm)
    contradicted = rate_answer(_answer(text="a red sports car"), llm)
    assert shown is not None and contradicted is not None
    assert 0.0 <= contradicted < shown <= 1.0
