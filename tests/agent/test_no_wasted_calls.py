"""No wasted calls (issue 42): a repeated call costs only the answer's call, an unusable reply is retried once and
then the planner answers with what it has, and a budget of seconds starts no call its recent calls say cannot
finish in time. A scripted model counts the calls; a fake clock stands in for time."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import pytest

from vidagent.agent.mcts import MCTSPlanner
from vidagent.agent.react import ReActPlanner
from vidagent.agent.steps import EvaluationStep, FinalAnswerStep, FormatErrorStep, ToolCallStep
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.llm.base import Completion, Message
from vidagent.llm.budget import Budget, BudgetSpentError
from vidagent.llm.metered import MeteredChat
from vidagent.session import Session
from vidagent.tools.base import Evidence, Observation, Parameter, Tool

from fakes import ScriptedLLM, scripted_perception
from fakes.media import counted_video

CAPTIONS = ["a woman holds a ball", "a dog jumps", "a dog runs with a black leash"]
CHOICES = ("a black leash", "a rope toy", "a long scarf", "a garden hose", "nothing is attached")
QUESTION = "What is attached to the dog?"
READ_ALL = "Thought: read everything\nAction: caption_retrieval\nAction Input: 0, 2"
ANSWER = "Thought: I now know the final answer\nFinal Answer: a black leash"
ASKED_TO_ANSWER = "Reply now with your best answer"  # in both requests for the answer (a repetition's, the forced one)


class Reads:
    """The caption tool, counting the times it ran."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, start_segment: int, end_segment: int) -> Observation:
        self.runs += 1
        chosen = range(max(0, start_segment), min(len(CAPTIONS) - 1, end_segment) + 1)
        return Observation("\n".join(f"Segment {i}: {CAPTIONS[i]}" for i in chosen),
                           evidence=tuple(Evidence(2.0 * i, 2.0 * i + 2, CAPTIONS[i], "v1") for i in chosen))


def toolbox(reads: Reads) -> Toolbox:
    parameters = (Parameter("start_segment", int, ""), Parameter("end_segment", int, ""))
    return Toolbox.of([Tool("caption_retrieval", "Read segment descriptions.", parameters, reads)],
                      sources=(counted_video("v1", 6.0, 3, 2.0),))


def stuck(reply: str) -> Callable[[Sequence[Message]], str]:
    """A model that always replies ``reply``, but answers when it is asked for its answer."""
    return lambda messages: ANSWER if ASKED_TO_ANSWER in messages[-1].content else reply


class FakeClock:
    """Time that moves only when a scripted call says it took so long."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def taking(self, seconds: float, reply: Callable[[Sequence[Message]], str]) -> Callable[[Sequence[Message]], str]:
        """``reply``, as a call that takes ``seconds``."""
        def call(messages: Sequence[Message]) -> str:
            self.now += seconds
            return reply(messages)
        return call


# -- 1. a repeated call ----------------------------------------------------------------------------------
def test_a_model_that_repeats_its_call_pays_for_the_answer_only():
    # Before: the call, three repetitions each told "You already made this exact call", the forced answer (5 calls).
    reads, llm = Reads(), ScriptedLLM([stuck(READ_ALL)] * 10)
    answer = ReActPlanner(overview_segments=0).run(Task(QUESTION, CHOICES), toolbox(reads), llm)
    assert len(llm.requests) == 3 and reads.runs == 1  # the call, its repetition, the answer; the tool ran once
    assert answer.choice_index == 0 and answer.trace.last.how == "forced"
    refused = [step for step in answer.trace if isinstance(step, FormatErrorStep)]
    assert len(refused) == 1 and refused[0].message.startswith("You already made this exact call")


def test_a_repeated_call_ends_an_mcts_chain_in_its_answer():
    # Before: the repetitions went back to the model until max_depth (8 steps), then the answer was forced (9 calls).
    reads, llm = Reads(), ScriptedLLM([stuck(READ_ALL)] * 12)
    answer = MCTSPlanner(n=1, overview_segments=0, seed=7).run(Task(QUESTION, CHOICES), toolbox(reads), llm)
    assert len(llm.requests) == 3 and reads.runs == 1
    assert answer.choice_index == 0 and answer.artifacts["search"]["nodes"][-1]["answer"] == "a black leash"


# -- 2. unusable replies -----------------------------------------------------------------------------------
def test_react_retries_an_unusable_reply_once_then_forces_its_answer():
    # Before: three unusable replies, then the forced answer (4 calls); now two, then the answer (3).
    llm = ScriptedLLM([stuck("I am not sure.")] * 10)
    answer = ReActPlanner(overview_segments=0).run(Task(QUESTION, CHOICES), toolbox(Reads()), llm)
    assert len(llm.requests) == 3 and answer.choice_index == 0
    final = answer.trace.last
    assert isinstance(final, FinalAnswerStep) and final.how == "forced" and final.thought == "(unusable replies)"
    # One unusable reply is retried, and a usable retry goes on as usual.
    llm = ScriptedLLM(["I am not sure.", READ_ALL, ANSWER])
    answer = ReActPlanner(overview_segments=0).run(Task(QUESTION, CHOICES), toolbox(Reads()), llm)
    assert len(llm.requests) == 3 and answer.trace.last.how == "model" and answer.choice_index == 0


@pytest.mark.parametrize("options, before", [({"n": 4}, 5), ({"n": 1, "errors_fail": False}, 9)])
def test_mcts_ends_its_search_after_an_unusable_reply_and_its_unusable_retry(options, before):
    # Before: each of n chains failed on an unusable reply (n=4: 4 calls, then the forced answer), or, with
    # errors_fail off, a chain went on with them until max_depth (8, then the forced answer).
    llm = ScriptedLLM([stuck("hmm")] * 12)
    answer = MCTSPlanner(overview_segments=0, seed=7, **options).run(Task(QUESTION, CHOICES), toolbox(Reads()), llm)
    assert len(llm.requests) == 3 < before  # two unusable replies, then the answer forced at the latest chain
    assert answer.choice_index == 0 and answer.trace.last.how == "forced"
    assert [node["failure"] for node in answer.artifacts["search"]["nodes"]].count("unusable reply") == \
        (2 if options.get("errors_fail", True) else 1)
    ended = [s for s in answer.trace if isinstance(s, EvaluationStep) and "unusable replies in a row" in s.text]
    assert len(ended) == 1


def test_mcts_keeps_searching_after_an_unusable_reply_that_its_retry_makes_good():
    llm = ScriptedLLM(["hmm", READ_ALL, ANSWER])  # chain 1 fails on "hmm"; chain 2 answers
    answer = MCTSPlanner(n=2, overview_segments=0, seed=7).run(Task(QUESTION, CHOICES), toolbox(Reads()), llm)
    assert len(llm.requests) == 3 and [i["failed"] for i in answer.artifacts["search"]["iterations"]] == [True, False]
    assert answer.choice_index == 0 and answer.trace.last.how == "vote"


def test_peil_answers_after_an_unusable_reply_and_its_unusable_retry_without_further_attempts(scripted):
    # Before: each of 3 attempts spent three unusable replies, the forced answer and the self-check (15 calls).
    def reply(messages: Sequence[Message]) -> str:
        if "Below is an attempt to answer" in messages[-1].content:
            return "No: nothing was looked at"
        return "Thought: I now know the final answer\nFinal Answer: a guitar" \
            if ASKED_TO_ANSWER in messages[-1].content else "I am not sure."

    llm = ScriptedLLM([reply] * 20)
    settings = replace(scripted.settings(), experience="none")
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", ["a guitar", "a car", "a house"], planner="peil",
                             planner_options={"look_first": False, "attempts": 3})
    assert len(llm.requests) == 3 and answer.choice_index == 0
    assert answer.artifacts["attempts"] == 1 and answer.artifacts["checks"][0]["mode"] is None  # not checked
    assert any(isinstance(s, EvaluationStep) and "ended in unusable replies" in s.text for s in answer.trace)


# -- 3. a budget of seconds ----------------------------------------------------------------------------------
def test_the_meter_starts_no_call_its_recent_calls_say_cannot_finish_in_time():
    clock = FakeClock()
    llm = MeteredChat(ScriptedLLM([clock.taking(40, lambda m: "ok")] * 3), budget=Budget(seconds=100), clock=clock)
    llm.chat([Message("user", "one")])  # 0 -> 40 s: the first call has nothing to be judged by
    assert llm.calls_left() == 1  # 60 s left hold one call of 40 s
    llm.chat([Message("user", "two")])  # 40 -> 80 s
    assert llm.calls_left() == 0
    with pytest.raises(BudgetSpentError, match=r"seconds 80 of 100: a call takes up to 40 s, 20 s are left"):
        llm.chat([Message("user", "three")])  # before: it started, and ended at 120 s
    assert clock.now == 80 and llm.meter.to_dict()["spent"] == {"calls": 2, "tokens": 4, "seconds": 80.0,
                                                               "frames": 0}


def test_the_expected_length_of_a_call_is_the_longest_of_the_last_few():
    clock = FakeClock()
    replies = [clock.taking(seconds, lambda m: "ok") for seconds in (50, 1, 1, 1, 1, 1)]
    llm = MeteredChat(ScriptedLLM([*replies, Completion("cached", 1, 1, 0.0, cached=True)]),
                      budget=Budget(seconds=1000), clock=clock)
    expected = []
    for _ in range(7):
        llm.chat([Message("user", "q")])
        expected.append(llm.meter.expected_call_seconds())
    assert expected == [50, 50, 50, 50, 50, 1, 1]  # the slow call counts for the next five, then drops out
    cached = MeteredChat(ScriptedLLM([Completion("x", 1, 1, 0.0, cached=True)]), budget=Budget(seconds=1), clock=clock)
    cached.chat([Message("user", "q")])
    assert cached.meter.expected_call_seconds() is None and cached.calls_left() is None  # no time taken: no guess


def test_react_keeps_the_last_call_that_fits_in_time_for_its_answer():
    # Before: three tool steps (0-150 s) and a refusal past the limit, with no answer: the budget abstained.
    clock = FakeClock()
    steps = iter(range(3))

    def reply(messages: Sequence[Message]) -> str:
        if ASKED_TO_ANSWER in messages[-1].content:
            return ANSWER
        segment = next(steps)
        return f"Thought: read on\nAction: caption_retrieval\nAction Input: {segment}, {segment}"

    llm = MeteredChat(ScriptedLLM([clock.taking(50, reply)] * 5), budget=Budget(seconds=120), clock=clock)
    answer = ReActPlanner(overview_segments=0).run(Task(QUESTION, CHOICES), toolbox(Reads()), llm)
    assert answer.usage.llm_calls == 2 and clock.now == 100  # one step, then the answer, within 120 s
    assert answer.choice_index == 0 and answer.trace.last.how == "forced"
    assert [s.tool for s in answer.trace if isinstance(s, ToolCallStep)] == ["caption_retrieval"]


def test_a_search_stops_before_a_call_that_would_pass_the_seconds():
    clock = FakeClock()
    replies = [clock.taking(30, lambda m: READ_ALL), clock.taking(30, lambda m: ANSWER)] + \
        [clock.taking(30, stuck("hmm"))] * 8
    llm = MeteredChat(ScriptedLLM(replies), budget=Budget(seconds=100), clock=clock)
    with pytest.raises(BudgetSpentError, match="a call takes up to 30 s"):  # the session answers with what it reached
        MCTSPlanner(n=4, overview_segments=0, seed=7).run(Task(QUESTION, CHOICES), toolbox(Reads()), llm)
    assert clock.now == 90 and llm.usage.llm_calls == 3  # within 100 s: a fourth call would have ended at 120 s


@pytest.mark.parametrize("said, none", [("None", True), ("N/A", True), ("unknown.", True), ("Cannot be determined", True),
                                        ("none of the above", True), ("a dog", False), ("B", False), ("none", False)])
def test_a_final_answer_that_reaches_none_is_told_from_an_answer(said, none):
    from vidagent.agent.parsing import reaches_no_answer

    choices = ["a cat", "a dog", "none"] if said == "none" else ["a cat", "a dog", "a bird"]
    assert reaches_no_answer(said, choices) is none


def test_react_abstains_when_its_final_answer_is_none_instead_of_having_an_option_pushed_on_it():
    # Before: "Final Answer: None" was mapped to an option (a call asking which option it means, or the scores).
    llm = ScriptedLLM([READ_ALL, "Thought: nothing says\nFinal Answer: None"])
    answer = ReActPlanner(overview_segments=0, choose_by="text").run(Task(QUESTION, CHOICES), toolbox(Reads()), llm)
    assert len(llm.requests) == 2  # no call asking which option "None" means
    assert answer.choice_index is None and answer.abstained.startswith("the planner reached no answer")
    assert answer.to_dict()["abstained"] is True
