"""Multiple choice by likelihood: option numbers' first-token probabilities, the caption-only
baseline and a ReAct chain choosing by them (scripted model replies carrying log-probabilities),
and the fall-back to the generated answer when a backend gives none."""

from __future__ import annotations

import math

import pytest

from vidagent.agent.option_scoring import choose, cyclic_orders, option_probabilities, resolved, score_options
from vidagent.agent.planner import build_planner
from vidagent.agent.steps import FinalAnswerStep, TaskStep, Trace
from vidagent.agent.task import Task
from vidagent.config import Settings
from vidagent.errors import PlannerError
from vidagent.llm.base import Completion, Message, first_token_logprobs
from vidagent.llm.budget import Budget, BudgetSpentError
from vidagent.llm.metered import MeteredChat
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


def by_position(*probabilities: float) -> Completion:
    """A scoring reply whose first token is an option number with these probabilities, by position."""
    return scored(*sorted(((str(i), math.log(p)) for i, p in enumerate(probabilities)), key=lambda pair: -pair[1]))


def test_cyclic_orders_shift_the_options_one_place_each():
    assert cyclic_orders(3, 3) == [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    assert cyclic_orders(4, 2) == [(0, 1, 2, 3), (1, 2, 3, 0)]
    assert cyclic_orders(2, 5) == [(0, 1), (1, 0)]  # never more orders than options


def test_permuted_choice_averages_the_orders_so_a_favourite_position_cancels(scripted, settings):
    # the model leans to the last position in every order; by content it prefers "a car"
    llm = ScriptedLLM([by_position(0.1, 0.4, 0.5),    # as given: a house (last) would win alone
                       by_position(0.45, 0.1, 0.45),  # a car, a house, a guitar
                       by_position(0.1, 0.1, 0.8)])   # a house, a guitar, a car
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", CHOICES, planner="caption_only",
                             planner_options={"choose_by": "permuted"})
    assert answer.choice_index == 1 and answer.text == "a car"
    assert len(llm.requests) == 3 and all(s["top_logprobs"] == 20 for s in llm.sampling)
    body = llm.requests[0][1].content
    assert "Question: What is drawn?" in body and "Options:" not in body  # options only where they are scored
    assert [request[1].content for request in llm.requests] == [body] * 3  # one shared prefix
    shown = [request[-1].content for request in llm.requests]
    assert "0. a guitar\n1. a car\n2. a house" in shown[0]
    assert "0. a car\n1. a house\n2. a guitar" in shown[1]
    assert "0. a house\n1. a guitar\n2. a car" in shown[2]
    per_order = answer.artifacts["option_probabilities"]
    assert per_order[0] == pytest.approx([0.1, 0.4, 0.5]) and per_order[1] == pytest.approx([0.45, 0.45, 0.1])
    assert per_order[2] == pytest.approx([0.1, 0.8, 0.1])
    assert answer.candidates[0].likelihood == pytest.approx(0.55, abs=1e-3)
    steps = [step for step in answer.trace if isinstance(step, FinalAnswerStep)]
    assert len(steps) == 3 and "options shifted 2" in steps[2].thought


def test_permuted_choice_stops_at_the_budget_with_the_orders_it_read():
    task = Task("What is drawn?", choices=tuple(CHOICES))
    llm = MeteredChat(ScriptedLLM([by_position(0.1, 0.3, 0.6), by_position(0.7, 0.2, 0.1)]), budget=Budget(calls=2))
    trace = Trace()
    root = trace.add(TaskStep(question=task.question))
    scores = score_options(llm, [Message("user", "descriptions")], task, trace, parent_id=root.id, orders=3)
    assert scores is not None and len(scores.per_order) == 2
    assert scores.index == 1 and scores.probabilities[1] == pytest.approx((0.3 + 0.7) / 2)
    with pytest.raises(BudgetSpentError):  # nothing read at all: the budget's error stands
        score_options(llm, [Message("user", "descriptions")], task, trace, parent_id=root.id, orders=3)


def test_permuted_choice_without_log_probabilities_reads_the_generated_answer_with_its_options(scripted, settings):
    llm = ScriptedLLM([Completion("The", 50, 1, 0.01), "Answer: 1"])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", CHOICES, planner="caption_only",
                             planner_options={"choose_by": "permuted"})
    assert answer.choice_index == 1 and len(llm.requests) == 2  # no other order asked of a backend without them
    assert "Options:\n0. a guitar" in llm.requests[1][-1].content


@pytest.mark.models
def test_the_embedded_model_scores_every_order_reading_only_the_options_anew():
    from vidagent.llm.client import LLM
    from vidagent.llm.local import LocalGGUFBackend
    from vidagent.models.install import model_path

    backend = LocalGGUFBackend(model_path("qwen2.5-1.5b", Settings.from_env().models_dir), context_tokens=2048)
    llm = MeteredChat(LLM(backend))
    task = Task("What colour is the sky on a clear day at noon?", choices=("green", "blue", "red"))
    trace = Trace()
    root = trace.add(TaskStep(question=task.question))
    context = [Message("user", "Descriptions of a video:\n[0.0-2.0 s] A wide view of an empty beach under a "
                               "cloudless sky.\n\nQuestion: " + task.question)]
    scores = score_options(llm, context, task, trace, parent_id=root.id, orders=3)
    assert scores is not None and task.choices[scores.index] == "blue" and len(scores.per_order) == 3
    assert all(max(range(3), key=order.__getitem__) == 1 for order in scores.per_order)  # blue wherever it stands
    assert all(sum(order) == pytest.approx(1.0) for order in scores.per_order)
    later = [step for step in trace if isinstance(step, FinalAnswerStep)][1:]
    assert len(later) == 2 and llm.usage.llm_calls == 3
    assert backend.last_timings.get("cache_n", 0) > 0  # the last order re-read only what follows the shared prefix


def test_an_order_whose_likeliest_tokens_name_no_option_is_left_out_of_the_mean():
    task = Task("What is drawn?", choices=tuple(CHOICES))
    llm = ScriptedLLM([scored(("The", -0.1), ("A", -2.0)), by_position(0.2, 0.7, 0.1), by_position(0.6, 0.2, 0.2)])
    trace = Trace()
    root = trace.add(TaskStep(question=task.question))
    scores = score_options(llm, [Message("user", "descriptions")], task, trace, parent_id=root.id, orders=3)
    assert scores is not None and len(llm.requests) == 3 and len(scores.per_order) == 2
    assert scores.index == 2 and scores.probabilities[2] == pytest.approx((0.7 + 0.6) / 2)  # a house, by orders 2 and 3


def continued(*logprobs: float) -> Completion:
    return Completion("", 50, len(logprobs), 0.01, token_logprobs=tuple(logprobs))


def test_continuation_scores_each_option_text_by_its_mean_token_log_probability():
    task = Task("What is drawn?", choices=tuple(CHOICES))
    # "a guitar" is short and likely; "a car" longer in tokens but likelier per token; "a house" unlikely
    # asked in the options' sorted order: "a car", "a guitar", "a house"
    llm = ScriptedLLM([continued(-0.4, -0.6, -0.5), continued(-0.5, -1.5), continued(-3.0, -2.0)],
                      scores_continuations=True)
    trace = Trace()
    root = trace.add(TaskStep(question=task.question))
    scores = choose(llm, [Message("user", "descriptions")], task, trace, root.id, "continuation")
    assert scores is not None and scores.index == 1 and scores.mean_logprobs == (-1.0, -0.5, -2.5)
    assert [s["continuation"] for s in llm.sampling] == sorted(CHOICES)
    assert all(request[-1].content == "Answer the question in one sentence." for request in llm.requests)
    assert sum(scores.probabilities) == pytest.approx(1.0)
    steps = [step for step in trace if isinstance(step, FinalAnswerStep)]
    assert [step.how for step in steps] == ["continuation"] * 3 and "option 1: mean log-probability -0.500 over 3 tokens" in steps[0].thought


def test_continuation_on_a_model_that_cannot_score_falls_back_to_the_generated_answer(scripted, settings):
    llm = ScriptedLLM(["Answer: a car"])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", CHOICES, planner="caption_only",
                             planner_options={"choose_by": "continuation"})
    assert answer.choice_index == 1 and len(llm.requests) == 1 and not llm.sampling[0]["continuation"]


def test_caption_only_by_continuation_never_shows_the_options(scripted, settings):
    llm = ScriptedLLM([continued(-0.1), continued(-2.0), continued(-1.0)], scores_continuations=True)  # sorted order
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", CHOICES, planner="caption_only",
                             planner_options={"choose_by": "continuation"})
    assert answer.choice_index == 1 and answer.artifacts["mean_logprobs"] == [-2.0, -0.1, -1.0]
    assert all("Options:" not in message.content for request in llm.requests for message in request)
    assert 0.5 < answer.candidates[0].likelihood < 1.0


def test_caption_only_averages_its_evidence_subsets(scripted, settings):
    llm = ScriptedLLM([by_position(0.5, 0.3, 0.2), by_position(0.1, 0.6, 0.3)])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", CHOICES, planner="caption_only",
                             planner_options={"choose_by": "likelihood", "lines": "1", "samples": "2"})
    assert answer.choice_index == 1 and len(answer.artifacts["subsets"]) == 2
    first, second = (request[1].content for request in llm.requests)
    assert first != second  # each subset read other lines
    assert answer.artifacts["option_probabilities"] == [0.3, 0.45, 0.25]


def test_samples_need_a_scored_choice():
    with pytest.raises(PlannerError, match="samples > 1"):
        build_planner("caption_only", {"samples": "3", "choose_by": "text"})
    assert build_planner("caption_only", {"samples": "3"}).choose_by == "auto"  # scored by default (a local model)
    with pytest.raises(PlannerError, match="select must be one of"):
        build_planner("caption_only", {"select": "best", "lines": "5"})


def test_the_blind_control_reads_no_memory_and_scores_the_options(scripted, settings):
    llm = ScriptedLLM([by_position(0.2, 0.5, 0.3), by_position(0.3, 0.2, 0.5), by_position(0.5, 0.3, 0.2)])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", CHOICES, planner="blind")
    assert answer.planner == "blind" and len(llm.requests) == 3
    text = "\n".join(message.content for message in llm.requests[0])
    assert "What is drawn?" in text and "[0.0-2.0 s]" not in text and "no video to watch" in text
    assert answer.choice_index is not None and answer.candidates[0].likelihood is not None
    assert answer.artifacts["option_probabilities"] and not answer.evidence


@pytest.mark.models
def test_the_embedded_model_scores_option_texts_reading_the_shared_prompt_once():
    from vidagent.llm.client import LLM
    from vidagent.llm.local import LocalGGUFBackend
    from vidagent.models.install import model_path

    backend = LocalGGUFBackend(model_path("qwen2.5-1.5b", Settings.from_env().models_dir), context_tokens=2048)
    llm = MeteredChat(LLM(backend))
    task = Task("What is the weather like on the beach?", choices=(
        "It is snowing heavily.", "It is sunny with a clear sky.", "A storm is flooding the beach."))
    trace = Trace()
    root = trace.add(TaskStep(question=task.question))
    context = [Message("user", "Descriptions of a video:\n[0.0-2.0 s] A wide view of an empty beach under a "
                               "cloudless sky, bright sunshine.\n\nQuestion: " + task.question)]
    scores = choose(llm, context, task, trace, root.id, "continuation")
    assert scores is not None and scores.index == 1
    assert all(mean < 0 for mean in scores.mean_logprobs) and len(set(scores.mean_logprobs)) == 3
    assert llm.usage.llm_calls == 3 and backend.last_timings.get("cache_n", 0) > 0  # the prompt was reused


def test_auto_scores_sentences_by_their_text_and_short_options_by_their_numbers():
    sentences = Task("What is C doing?", choices=("C is cleaning the kitchen after cooking dinner.",
                                                  "C is repairing a bicycle in the garage today.",
                                                  "C is painting a large wall in the living room."))
    phrases = Task("What is drawn?", choices=tuple(CHOICES))
    scoring = ScriptedLLM([continued(-1.0), continued(-2.0), continued(-0.2)], scores_continuations=True)  # sorted
    trace = Trace()
    root = trace.add(TaskStep(question="q"))
    scores = choose(scoring, [Message("user", "descriptions")], sentences, trace, root.id, "auto")
    assert scores is not None and scores.index == 1 and scores.mean_logprobs
    numbers = ScriptedLLM([by_position(0.2, 0.5, 0.3), by_position(0.3, 0.2, 0.5), by_position(0.5, 0.3, 0.2)],
                          scores_continuations=True)
    scores = choose(numbers, [Message("user", "descriptions")], phrases, trace, root.id, "auto")
    assert scores is not None and len(scores.per_order) == 3 and not any(s["continuation"] for s in numbers.sampling)
    endpoint = ScriptedLLM([])  # a model that cannot score a given reply (an endpoint): its answer is read
    assert choose(endpoint, [Message("user", "d")], sentences, trace, root.id, "auto") is None
    assert choose(endpoint, [Message("user", "d")], phrases, trace, root.id, "auto") is None and not endpoint.requests
    assert resolved("auto", phrases, endpoint) == "text" and resolved("permuted", phrases, endpoint) == "permuted"


def test_auto_scores_option_numbers_through_an_endpoint_that_returns_log_probabilities():
    """An endpoint probed to return log-probabilities (llama.cpp's server, vLLM) but unable to score a given reply
    has every option scored by its number in every order, sentences too; an open question reads its answer."""
    sentences = Task("What is C doing?", choices=("C is cleaning the kitchen after cooking dinner.",
                                                  "C is repairing a bicycle in the garage today.",
                                                  "C is painting a large wall in the living room."))
    endpoint = ScriptedLLM([by_position(0.2, 0.5, 0.3), by_position(0.3, 0.2, 0.5), by_position(0.5, 0.3, 0.2)])
    endpoint.returns_logprobs = True
    assert resolved("auto", sentences, endpoint) == "permuted"
    assert resolved("auto", Task("What is C doing?"), endpoint) == "text"
    trace = Trace()
    root = trace.add(TaskStep(question="q"))
    scores = choose(endpoint, [Message("user", "descriptions")], sentences, trace, root.id, "auto")
    assert scores is not None and len(scores.per_order) == 3 and math.isclose(sum(scores.probabilities), 1.0)
