"""Multiple choice by likelihood: option numbers' first-token probabilities, the caption-only
baseline and a ReAct chain choosing by them (scripted model replies carrying log-probabilities),
and the fall-back to the generated answer when a backend gives none."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from vidagent.agent.option_scoring import option_probabilities
from vidagent.agent.steps import FinalAnswerStep
from vidagent.config import Settings
from vidagent.errors import PlannerError
from vidagent.llm.base import Completion, first_token_logprobs
from vidagent.session import Session

from fakes import ScriptedLLM, scripted_perception

CHOICES = ["a guitar", "a car", "a house"]


def scored(*pairs: tuple[str, float]) -> Completion:
    return Completion(pairs[0][0], 50, 1, 0.01, first_token_logprobs=tuple(pairs))


@pytest.fixture()
def settings(scripted) -> Settings:
    return scripted.settings()


def test_option_numbers_are_read_from_the_likeliest_first_tokens():
    probabilities = option_probabilities([("1", -0.2), (" 0", -1.9), ("0", -2.5), ("The", -3.0), ("7", -4.0)], 3)
    assert probabilities is not None and probabilities[2] == 0.0
    assert probabilities[1] > probabilities[0] > 0 and sum(probabilities) == pytest.approx(1.0)
    assert option_probabilities([("Answer", -0.1), ("The", -1.0)], 3) is None
    assert option_probabilities([], 3) is None


def test_openai_style_replies_give_their_first_token_logprobs():
    choice = {"logprobs": {"content": [{"token": "2", "logprob": -0.1,
                                         "top_logprobs": [{"token": "1", "logprob": -2.0},
                                                          {"token": "2", "logprob": -0.1}]}]}}
    assert first_token_logprobs(choice) == (("2", -0.1), ("1", -2.0))
    assert first_token_logprobs({"message": {"content": "x"}}) == ()


def test_caption_only_chooses_by_likelihood_in_one_token(scripted, settings):
    llm = ScriptedLLM([scored(("2", -0.3), ("0", -1.5), ("1", -3.0))])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", CHOICES, planner="caption_only",
                             planner_options={"choose_by": "likelihood"})
    assert answer.choice_index == 2 and answer.text == "a house"
    assert llm.sampling[0]["top_logprobs"] == 20 and len(llm.requests) == 1
    request = llm.requests[0]
    assert "Segment" not in request[0].content and "[0.0-2.0 s]" in request[1].content
    assert request[-1].content.startswith("Which option is correct?") and "2. a house" in request[-1].content
    step = answer.trace[answer.candidates[0].step_id]
    assert isinstance(step, FinalAnswerStep) and step.how == "likelihood" and "2: 0." in step.thought
    assert 0.6 < answer.candidates[0].likelihood < 0.8


def test_without_log_probabilities_the_generated_answer_is_read(scripted, settings):
    llm = ScriptedLLM([Completion("The", 50, 1, 0.01), "Answer: a car"])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", CHOICES, planner="caption_only",
                             planner_options={"choose_by": "likelihood"})
    assert answer.choice_index == 1 and llm.sampling[1]["top_logprobs"] == 0
    assert 'starts with "Answer:"' in llm.requests[1][-1].content


def test_a_react_chain_chooses_its_option_by_likelihood_after_its_answer(scripted, settings):
    llm = ScriptedLLM(["no", "Thought: read it\nFinal Answer: something with strings",
                       scored(("0", -0.05), ("1", -3.0))])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is being drawn?", CHOICES,
                             planner_options={"choose_by": "likelihood"})
    assert answer.choice_index == 0 and answer.candidates[0].likelihood > 0.9
    scoring = llm.requests[2]
    assert scoring[-2].role == "assistant" and "something with strings" in scoring[-2].content
    with Session(settings, perception=scripted_perception(), llm=ScriptedLLM([])) as session, pytest.raises(PlannerError, match="choose_by"):
        session.ask(scripted.toy, "What?", CHOICES, planner_options={"choose_by": "vote"})
