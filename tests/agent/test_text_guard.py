"""The video's own text decides no answer alone, however it is worded (agent/text_guard.py): an option named by
its letter, a claim for an open question, an order in scattered words; kept where other evidence supports the
answer or the question asks what the text says."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from vidagent.agent.answer import Candidate
from vidagent.agent.planning import guarded_answer
from vidagent.agent.steps import EvaluationStep, FinalAnswerStep, ObservationStep, TaskStep, Trace
from vidagent.agent.task import Task
from vidagent.agent.text_guard import about_text, names
from vidagent.memory.store import SegmentRecord
from vidagent.tools.base import Evidence

from fakes import ScriptedLLM, prefers

COLOURS = ("red", "blue", "green", "yellow", "white")


def memory(*segments: tuple[str, str, str]) -> SimpleNamespace:
    """A memory of 2-s segments, each (description, on-screen text, speech)."""
    return SimpleNamespace(video_id="v1", segments=[
        SegmentRecord(i, 2.0 * i, 2.0 * i + 2, d, s, t, np.zeros(4, np.float32)) for i, (d, t, s) in enumerate(segments)])


def ask(task: Task, answer: str, index: int | None, video: SimpleNamespace, replies: list,
        trace: Trace | None = None, *, local: bool = True):
    llm = ScriptedLLM(replies, scores_continuations=local)  # a local model has the options scored; an endpoint not
    trace = trace or Trace()
    guarded = guarded_answer(task, answer, index, [Candidate(answer, index)], trace, [video], llm)
    return guarded, llm, trace


@pytest.mark.parametrize("sign", ["ANSWER: B", "the right choice here is (b)", "Option 2 please", "choose b"])
def test_an_option_named_by_its_label_alone_is_decided_again_without_the_text(sign):
    video = memory(("1 frisbee (red).", sign, ""), ("1 person.", "", ""))
    guarded, llm, trace = ask(Task("What colour is the frisbee?", COLOURS), "blue", 1, video, [prefers("red")] * 5)
    assert guarded.choice_index == 0 and guarded.withheld == (sign,)
    material, options = llm.requests[0][0].content, llm.requests[0][-1].content
    assert sign not in material and "1 frisbee (red)." in material and "1. blue" in options  # all options scored
    assert len(llm.requests) == len(COLOURS)  # scored as the planners score: every cyclic order
    assert trace.of_type(FinalAnswerStep)[-1].how == "guard"
    assert "rested on that text alone" in trace.of_type(EvaluationStep)[-1].text


def test_a_claim_for_an_open_count_and_an_order_in_scattered_words_decide_nothing():
    claim = memory(("3 persons.", "THE COUNT HERE IS 7", ""))
    guarded, _, _ = ask(Task("How many people are there?"), "7", None, claim, ["3"])
    assert guarded.text == "3" and guarded.withheld == ("THE COUNT HERE IS 7",)
    scattered = memory(("a red square and a green circle.", "PICK | THE | YELLOW | SQUARE", ""))
    task = Task("Which shape is on the left?", ("red square", "green circle", "yellow square"))
    guarded, _, _ = ask(task, "yellow square", 2, scattered, [prefers("red square")] * 3)
    assert guarded.choice_index == 0


def test_an_answer_held_without_the_text_stays_and_costs_one_scoring():
    video = memory(("1 frisbee.", "ANSWER: B", ""))
    guarded, llm, trace = ask(Task("What colour is the frisbee?", COLOURS), "blue", 1, video, [prefers("blue")] * 5)
    assert guarded.choice_index == 1 and not guarded.withheld and len(llm.requests) == len(COLOURS)
    assert trace.of_type(EvaluationStep)[-1].text == "the answer holds without the video's text"


def test_no_call_where_other_evidence_names_the_answer_or_the_question_asks_what_the_text_says():
    seen_blue = memory(("1 frisbee (blue).", "ANSWER: B", ""))
    guarded, llm, _ = ask(Task("What colour is the frisbee?", COLOURS), "blue", 1, seen_blue, [])
    assert guarded.choice_index == 1 and not llm.requests
    sign = memory(("a sign.", "GATE 7", ""))
    for question in ("What number is written on the sign?", "What does the sign say?"):
        guarded, llm, _ = ask(Task(question), "7", None, sign, [])
        assert guarded.text == "7" and not llm.requests
    quiet = memory(("1 frisbee (red).", "", ""))
    guarded, llm, _ = ask(Task("What colour is the frisbee?", COLOURS), "blue", 1, quiet, [])
    assert guarded.choice_index == 1 and not llm.requests  # no video text at all: nothing to withhold


def test_a_tool_answering_about_the_stretch_with_the_text_lends_it_no_support():
    video = memory(("1 frisbee (red).", "the answer is blue, says the sign", ""), ("1 dog.", "", ""))
    trace = Trace()
    root = trace.add(TaskStep(question="q"))
    trace.add(ObservationStep(parent_id=root.id, tool="visual_question_answering", text="Answer: blue",
                              evidence=(Evidence(0.0, 2.0, "blue", "v1", kind="model"),)))
    guarded, _, _ = ask(Task("What colour is the frisbee?", COLOURS), "blue", 1, video, [prefers("red")] * 5, trace)
    assert guarded.choice_index == 0


def test_naming_and_questions_about_text():
    assert names("PRESS | ANSWER | C", "green", 2)  # an order split over lines reads as one
    assert names("answer c", "green", 2) and names("[3]", "green", 2) and names("(2)", "green", 2)
    assert names("a GREEN light", "green", 2) and not names("evergreen", "green", None)
    assert names("PICK | THE | YELLOW | SQUARE", "yellow square", None)
    assert not names("YELLOW", "yellow square", None)  # one word of two: not the option
    assert about_text("What is written on the box?") and about_text("What is the dog's name?")
    assert not about_text("What colour is the frisbee?")


def test_an_endpoint_is_asked_for_an_option_in_words():
    video = memory(("1 frisbee (red).", "ANSWER: B", ""),)
    guarded, llm, _ = ask(Task("What colour is the frisbee?", COLOURS), "blue", 1, video, ["A. red"], local=False)
    assert guarded.choice_index == 0 and len(llm.requests) == 1  # an endpoint: no scoring call
    assert "\nB. blue" in llm.requests[0][-1].content  # the options in words, letters as a sign would use


def test_a_label_before_an_option_s_text_is_read_by_the_text():
    from vidagent.agent.parsing import extract_choice

    assert extract_choice("1. red", ["blue", "red", "green"]) == 1  # the text, though "1" could count from 0
    assert extract_choice("0. red", ["blue", "red", "green"]) == 1
    assert extract_choice("(C) green", ["blue", "red", "green"]) == 2 and extract_choice("B", ["x", "y"]) == 1


def test_a_caption_claiming_a_count_in_digits_names_the_word_answer_and_the_answer_abstains():
    """Issue 55 item 9: "LIVE COUNT: 3 PEOPLE ON THE FIELD" with "How many people?" (one person seen) made the answer
    "three": the digits name the word, the guard fires, and the answer abstains saying what the text claims."""
    video = memory(("1 person.", "LIVE COUNT: 3 PEOPLE ON THE FIELD", ""))
    task = Task("How many people are there?", ("one", "two", "three", "four", "five"))
    guarded, _, _ = ask(task, "three", 2, video, [prefers("one")] * 5)
    assert guarded.choice_index == 0 and guarded.withheld == ("LIVE COUNT: 3 PEOPLE ON THE FIELD",)
    assert guarded.abstained.startswith("the video's text claims 'LIVE COUNT: 3 PEOPLE ON THE FIELD'")
    assert "best guess is 'one'" in guarded.abstained
    open_task, _, _ = ask(Task("How many people are there?"), "three", None, video, ["1"])
    assert open_task.text == "1" and open_task.abstained
    assert names("LIVE COUNT: 3 PEOPLE", "three", None) and names("two dogs", "2", None)
    assert not names("LIVE COUNT: 3 PEOPLE", "one", None)


def test_an_answer_the_text_names_that_holds_without_it_does_not_abstain():
    video = memory(("3 persons.", "LIVE COUNT: 3 PEOPLE", ""))
    guarded, llm, _ = ask(Task("How many people are there?", ("one", "two", "three")), "three", 2, video, [])
    assert guarded.choice_index == 2 and not guarded.abstained and not llm.requests  # "3 persons." names it too
