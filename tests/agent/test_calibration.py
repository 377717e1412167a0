"""The confidence as a probability of being right: measures read from an answer, maps fitted and applied."""

from __future__ import annotations

import math
import random

import pytest

from vidagent.agent.answer import Answer
from vidagent.agent.calibration import (Calibration, LogisticMap, answer_grounding, default_calibration,
                                        fit_logistic, logit, measure_of, option_grounding)
from vidagent.agent.confidence import UNSUPPORTED_CAP
from vidagent.agent.answer import Check
from vidagent.agent.steps import Trace
from vidagent.agent.task import Question, Source


def test_options_scored_in_every_order_give_their_mean_lead_and_agreement():
    measure = measure_of({"option_probabilities": [[0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.5, 0.4, 0.1]],
                          "memory_captioned": True}, 0, "What is it?", ("a red ball", "a dog", "a stick"),
                         ["a red ball rolls on the grass"])
    assert measure.kind == "permuted" and measure.features["grounding"] == pytest.approx(1.0)
    assert measure.features["top_logit"] == pytest.approx(logit(1.3 / 3))
    assert measure.features["lead"] == pytest.approx(1.3 / 3 - 1.4 / 3)
    assert measure.features["agreement"] == pytest.approx(2 / 3) and measure.features["uncaptioned"] == 0.0


def test_options_scored_by_their_text_give_the_lead_in_mean_log_probability_and_the_chosen_ones_length():
    measure = measure_of({"option_probabilities": [0.5, 0.3, 0.2], "mean_logprobs": [-0.5, -1.25, -2.0],
                          "memory_captioned": False}, 0, "What is it?", ("a ball", "a dog", "a red stick"), [])
    assert measure.kind == "continuation"
    assert measure.features == {"top_logit": pytest.approx(logit(0.5)), "logprob_lead": pytest.approx(0.75),
                                "length_ratio": pytest.approx(2 / (7 / 3)), "uncaptioned": 1.0, "grounding": 0.0}


def test_an_open_answer_is_measured_by_its_rating_and_what_it_asks_and_nothing_else_is_guessed():
    rated = {"rating": 0.8, "memory_captioned": True}
    assert measure_of(rated, None, "How many dogs are there?", (), []).features == {
        "rating_logit": pytest.approx(logit(0.8)), "grounding": 0.0, "asks_when": 0.0, "asks_count": 1.0,
        "uncaptioned": 0.0}
    assert measure_of(rated, None, "When does the dog jump?", (), []).features["asks_when"] == 1.0
    assert measure_of({"rating": 0.8}, None, "What is it?", (), []) is None  # the memory's kind unknown
    assert measure_of({"memory_captioned": True}, None, "What is it?", (), []) is None
    scored = {"option_probabilities": [0.5, 0.5], "memory_captioned": True}
    assert measure_of(scored, None, "What is it?", ("a", "b"), []) is None  # no option chosen
    assert measure_of(scored, 3, "What is it?", ("a", "b"), []) is None  # an option past the scored ones


def test_grounding_is_how_much_more_the_lines_read_name_the_chosen_option_than_any_other():
    choices = ("She throws a frisbee.", "She throws a ball.", "She pets the dog.")
    question = "What does the woman do with the dog?"
    assert option_grounding(question, choices, ["person 0.0-9.5 s", "dog 0.0-9.5 s"], 0) == 0.0  # nothing named
    thrown = ["the woman is throwing a red ball across the yard"]
    assert option_grounding(question, choices, thrown, 1) > 0 > option_grounding(question, choices, thrown, 0)
    assert option_grounding(question, choices, [], 2) == 0.0


def test_an_open_answer_is_grounded_by_the_share_of_its_own_words_the_lines_read_name():
    question = "What is the dog riding?"
    lines = ["1 dog (brown, medium, centre); 1 skateboard (black, small, bottom centre)."]
    assert answer_grounding(question, "The dog is riding the skateboard.", lines) == 1.0  # "dog", "riding" asked
    assert answer_grounding(question, "a red bicycle", lines) == 0.0  # from the model's prior
    assert answer_grounding(question, "a skateboard or a scooter", lines) == pytest.approx(0.5)
    assert answer_grounding("When does it jump?", "4.0 - 6.0", lines) == 0.0  # a time range names no line's word
    assert answer_grounding(question, "a skateboard", []) == 0.0
    rated = {"rating": 0.5, "memory_captioned": False}
    assert measure_of(rated, None, question, (), lines, "a skateboard").features["grounding"] == 1.0


def test_a_map_is_applied_only_to_the_planner_and_measure_it_was_fitted_for():
    calibration = Calibration({"caption_only": {"open": LogisticMap(-1.0, {"rating_logit": 2.0})}})
    measure = measure_of({"rating": 0.5, "memory_captioned": True}, None, "What is it?", (), [])
    assert calibration.probability("caption_only", measure) == pytest.approx(1 / (1 + math.e), abs=1e-4)
    assert calibration.probability("react", measure) is None
    assert calibration.probability("caption_only", None) is None
    assert Calibration.from_mapping(calibration.to_mapping()) == calibration


def test_a_map_holds_only_for_the_model_it_was_fitted_with():
    fitted = LogisticMap(0.0, {"rating_logit": 1.0}, "dev", models=("qwen2.5-coder-1.5b-instruct",))
    calibration = Calibration({"caption_only": {"open": fitted}})
    measure = measure_of({"rating": 0.5, "memory_captioned": True}, None, "What is it?", (), [])
    assert calibration.probability("caption_only", measure, "local:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf") == 0.5
    assert calibration.probability("caption_only", measure, "openai:gpt-4o-mini") is None
    assert Calibration.from_mapping(calibration.to_mapping()) == calibration


def test_the_fit_recovers_the_relation_that_made_the_outcomes():
    generator = random.Random(7)
    rows, outcomes = [], []
    for _ in range(4000):
        x = generator.uniform(-3, 3)
        rows.append({"x": x})
        outcomes.append(generator.random() < 1 / (1 + math.exp(-(0.5 + 1.5 * x))))
    intercept, weights = fit_logistic(rows, outcomes, ["x"])
    assert intercept == pytest.approx(0.5, abs=0.15) and weights["x"] == pytest.approx(1.5, abs=0.15)


def test_separable_outcomes_keep_finite_weights():
    intercept, weights = fit_logistic([{"x": float(i)} for i in range(10)], [i >= 5 for i in range(10)], ["x"])
    assert math.isfinite(intercept) and math.isfinite(weights["x"]) and weights["x"] > 0


def test_the_shipped_maps_load_and_cover_the_default_planner():
    shipped = default_calibration()
    assert set(shipped.maps.get("caption_only", {})) >= {"permuted", "continuation"}
    for kinds in shipped.maps.values():
        for fitted in kinds.values():
            assert fitted.fitted_on and fitted.models  # every map says what it was fitted on, and with which model
            assert fitted.fits("local:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")  # the embedded default model


def test_the_confidence_is_the_calibrated_probability_under_the_run_caps():
    task = Question("What does he draw?", ("a guitar", "a car")).about((Source("v1", "video", "/v1.mp4"),))
    answer = Answer(task=task, text="a guitar", planner="caption_only", choice_index=0, trace=Trace())
    assert answer.confidence is None and answer.measured_confidence is None
    answer.calibrated = 0.8
    assert answer.confidence == 0.8
    answer.check = Check((0,), (), (0.3, 0.7), "unsupported")
    assert answer.confidence == UNSUPPORTED_CAP and answer.measured_confidence == 0.3
    data = answer.to_dict()
    assert data["confidence"] == UNSUPPORTED_CAP and data["measured_confidence"] == 0.3
