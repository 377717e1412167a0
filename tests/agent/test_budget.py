"""A question's budget (calls, tokens, seconds): every planner stops when it is spent and answers with
what it has; react keeps its last call for the answer. A scripted model over a real stored memory, so
the call counts are exact."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from vidagent.agent.steps import FinalAnswerStep, ObservationStep
from vidagent.config import Settings
from vidagent.llm.base import Completion, Message
from vidagent.llm.budget import Budget, BudgetSpentError
from vidagent.llm.metered import MeteredChat
from vidagent.session import Session

from fakes import ScriptedLLM, scripted_perception

CHOICES = ["a guitar", "a car", "a house"]
TOOLS = {"tools": "caption_retrieval,segment_localization"}  # no object tool: no memory-selection call


@pytest.fixture()
def settings(scripted) -> Settings:
    return scripted.settings()


def test_a_budget_is_read_from_its_text_and_bad_ones_are_refused():
    assert Budget.parse("calls=4, tokens=6000,seconds=1.5") == Budget(4, 6000, 1.5)
    assert Budget.parse("frames=16") == Budget(frames=16) and str(Budget(calls=3, frames=8)) == "calls=3,frames=8"
    assert str(Budget.parse("seconds=60,calls=2")) == "calls=2,seconds=60"
    for bad, message in [("calls=0", "above 0"), ("seconds=nan", "above 0"), ("calls=two", "must be a number"), ("pixels=3", "write calls=N"),
                         ("calls=1,calls=2", "given twice"), ("", "an empty budget")]:
        with pytest.raises(ValueError, match=message):
            Budget.parse(bad)


def test_the_metered_model_refuses_a_call_once_calls_or_tokens_are_spent():
    llm = MeteredChat(ScriptedLLM(["one two three", "four"]), budget=Budget(tokens=5))
    llm.chat([Message("user", "a b c")])  # 3 prompt + 3 completion words: 6 tokens, over 5
    with pytest.raises(BudgetSpentError, match=r"tokens 6 of 5"):
        llm.chat([Message("user", "again")])
    counted = MeteredChat(ScriptedLLM([Completion("x", 1, 1, 0.0, cached=True), "y"]), budget=Budget(calls=1))
    counted.chat([Message("user", "q")])  # a cached reply is a call too: the cache never changes the path
    assert counted.calls_left() == 0
    with pytest.raises(BudgetSpentError):
        counted.chat([Message("user", "q")])


def test_react_keeps_its_last_call_for_the_answer(scripted, settings):
    llm = ScriptedLLM(["Thought: look\nAction: segment_localization\nAction Input: a drawing",
                       "Final Answer: a guitar"])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is being drawn?", CHOICES, planner="react",
                             planner_options=TOOLS, budget="calls=2")
    assert len(llm.requests) == 2 and answer.choice_index == 0
    assert "You have used all your steps" in llm.requests[1][-1].content  # the forced answer took the last call
    assert answer.artifacts["budget"] == {"limit": {"calls": 2}, "stopped": False,
                                          "spent": answer.artifacts["budget"]["spent"]}
    assert answer.artifacts["budget"]["spent"]["calls"] == 2


def test_a_frame_budget_thins_what_the_vision_model_sees_then_refuses_and_the_planner_goes_on(scripted, settings):
    look = "Thought: look\nAction: visual_question_answering\nAction Input: {{\"question\": \"what is drawn?\", " \
           "\"segment_id\": {}}}"
    llm = ScriptedLLM([look.format(0), "a guitar", look.format(1), "Final Answer: a guitar"])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is being drawn?", CHOICES, planner="react",
                             planner_options={"tools": "visual_question_answering"}, budget="frames=2")
    observations = [step.text for step in answer.trace.of_type(ObservationStep)]
    assert "Error" not in observations[0] and observations[0].count(" s: ") == 2  # two frames described, not more
    assert "frame budget is spent (2 of 2 frames looked at)" in observations[1]
    assert answer.choice_index == 0 and answer.artifacts["budget"]["spent"]["frames"] == 2
    assert answer.artifacts["budget"]["limit"] == {"frames": 2} and not answer.artifacts["budget"]["stopped"]


@pytest.mark.parametrize("planner, options, calls", [
    ("mcts", {"n": 2, **TOOLS}, 3), ("traveler", {"max_iterations": 3}, 2), ("peil", {"attempts": 2}, 2),
    ("react", {**TOOLS, "choose_by": "text"}, 1),
])
def test_every_planner_stops_at_its_budget_and_answers_with_what_it_has(scripted, settings, planner, options, calls):
    def reply(messages: list[Message]) -> str:
        text = messages[-1].content
        if "PLAN:" in text and "Make a plan" in text:
            return "PLAN: 1. read the descriptions"
        return "Thought: it is a guitar\nFinal Answer: a guitar" if len(llm.requests) == 1 else \
            "Thought: look again\nAction: segment_localization\nAction Input: a drawing"

    llm = ScriptedLLM([reply] * 50)
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is being drawn?", CHOICES, planner=planner,
                             planner_options=options, budget=f"calls={calls}")
    assert len(llm.requests) == calls == answer.usage.llm_calls  # never one past it
    spent = answer.artifacts["budget"]
    assert spent["limit"] == {"calls": calls} and spent["spent"]["calls"] == len(llm.requests)
    if spent["stopped"]:  # stopped mid-way: the last answer it had, recorded as reached by the budget
        final = answer.trace.of_type(FinalAnswerStep)[-1]
        assert final.how == "budget" and "budget is spent" in final.thought
        assert answer.text in ("", "a guitar")


def test_the_command_line_refuses_a_malformed_budget_in_one_line(scripted, tmp_path):
    done = subprocess.run([sys.executable, "-m", "vidagent.cli", "ask", str(scripted.toy), "What?",
                           "--budget", "calls=none"], capture_output=True, text=True,
                          env={"VIDAGENT_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "calls must be a number" in done.stderr and len(done.stderr.splitlines()) == 1


def test_a_stopped_search_answers_what_its_chains_reached_most_often():
    from vidagent.agent.planning import anytime_answer
    from vidagent.agent.steps import TaskStep, Trace
    from vidagent.agent.task import Task

    trace = Trace()
    root = trace.add(TaskStep(question="What is drawn?"))
    for reached in ("a car", "Final: a guitar", "a guitar", "a house"):
        trace.add(FinalAnswerStep(parent_id=root.id, answer=reached))
    llm = MeteredChat(ScriptedLLM([]), budget=Budget(calls=1))
    answer = anytime_answer("mcts", Task("What is drawn?", tuple(CHOICES)), trace, llm, "calls 1 of 1")
    assert answer.choice_index == 0 and answer.text == "a guitar" and not answer.abstained
    assert trace.of_type(FinalAnswerStep)[-1].how == "budget"
    empty = anytime_answer("react", Task("What is drawn?"), Trace(), llm, "calls 1 of 1")
    assert empty.text == "" and empty.abstained.startswith("no answer was reached") and empty.confidence == 0.0
