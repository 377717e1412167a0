"""The planners' settings moved from module constants (issue 38): a planner's own steps are its options (issue 54:
set with ``--planner-option``, listed by ``vidagent settings``), the check's are the toolbox's shapes
(``Settings.tools``); a changed value changes what it does, the default does what the constant did."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vidagent.agent.answer import Answer
from vidagent.agent.evidence_check import check_answer
from vidagent.agent.mcts import MCTSPlanner
from vidagent.agent.planner import build_planner, planner_options
from vidagent.agent.react import ReActPlanner
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.agent.traveler import TravelerPlanner
from vidagent.config import ToolShapes
from vidagent.errors import PlannerError
from vidagent.llm.metered import MeteredChat
from vidagent.tools.base import Evidence, Observation, Parameter, Tool

from fakes import ScriptedLLM
from fakes.media import counted_video

CHOICES = ("a black leash", "a rope toy", "a long scarf")
QUESTION = "What is attached to the dog?"
ANSWER = "Thought: I now know the final answer\nFinal Answer: a black leash"


def captions(shapes: ToolShapes | None = None) -> Toolbox:
    def read(start_segment: int, end_segment: int) -> Observation:
        return Observation("Segment 0: a dog runs with a black leash",
                           evidence=(Evidence(0.0, 2.0, "a dog runs with a black leash", "v1"),))

    parameters = (Parameter("start_segment", int, ""), Parameter("end_segment", int, ""))
    return Toolbox.of([Tool("caption_retrieval", "Read segment descriptions.", parameters, read)],
                      sources=(counted_video("v1", 6.0, 3, 2.0),), **({"shapes": shapes} if shapes else {}))


def unusable_then_answer(messages) -> str:
    return ANSWER if "Reply now with your best answer" in messages[-1].content else "I am not sure."


def test_unusable_replies_before_a_react_chain_or_an_mcts_search_ends_is_a_planner_option():
    for limit, calls in ((2, 3), (1, 2), (3, 4)):  # the unusable replies, then the forced answer
        llm = ScriptedLLM([unusable_then_answer] * 10)
        planner = build_planner("react", {"overview_segments": "0", "unusable_replies": str(limit)})
        answer = planner.run(Task(QUESTION, CHOICES), captions(), llm)
        assert len(llm.requests) == calls and answer.trace.last.thought == "(unusable replies)"
    llm = ScriptedLLM([unusable_then_answer] * 10)  # fewer failed steps than unusable replies: they end it first
    answer = ReActPlanner(overview_segments=0, unusable_replies=5, failed_steps=2).run(Task(QUESTION, CHOICES),
                                                                                     captions(), llm)
    assert len(llm.requests) == 3 and answer.trace.last.thought == "(step limit reached)"
    search = {}
    for limit in (2, 1):
        llm = ScriptedLLM([unusable_then_answer] * 20)
        MCTSPlanner(n=4, overview_segments=0, seed=7, unusable_replies=limit).run(Task(QUESTION, CHOICES),
                                                                                 captions(), llm)
        search[limit] = len(llm.requests)
    assert search[1] < search[2]
    with pytest.raises(PlannerError, match="unusable_replies must be between 1 and 10"):
        build_planner("mcts", {"unusable_replies": "0"})


class FakeFrames:
    def __init__(self) -> None:
        self.described: list[float] = []

    def toolbox(self, shapes: ToolShapes = ToolShapes()) -> Toolbox:
        window = (Parameter("start_s", float, ""), Parameter("end_s", float, ""))
        return Toolbox.of([Tool("frame_description", "describe", window, self.describe),
                           Tool("frame_question_answering", "ask", (Parameter("question", str, ""),) + window,
                                lambda question, start_s, end_s: Observation("Answer: a ball"))],
                          sources=(counted_video("v1", 20.0, 10, 2.0),), shapes=shapes)

    def describe(self, start_s: float, end_s: float) -> Observation:
        self.described.append(start_s)
        return Observation("a dog " + "with a very long description " * 40)


def test_travelers_opening_frames_and_stored_text_length_are_planner_options():
    frames = FakeFrames()
    llm = ScriptedLLM(["PLAN: look", "10", "[]", "enough\nFinal Answer: 0"])
    task = Task("What does the dog carry?", ("a ball", "a stick"))
    planner = build_planner("traveler", {"max_iterations": "1", "questions": "0", "opening": "0, 0.5",
                                         "answer_chars": "20"})
    assert planner.opening == (0.0, 0.5)
    answer = planner.run(task, frames.toolbox(), llm)
    assert frames.described[:2] == [0.0, 10.0]
    bank = answer.artifacts["memory_bank"]
    assert sorted(bank)[:1] == ["0.0"] and all(len(entry["seen"]) <= 20 for entry in bank.values())
    assert any(len(entry["seen"]) == 20 for entry in bank.values())


def test_the_checks_spans_and_their_length_are_settings():
    evidence = [Evidence(float(i), i + 1.0, f"the dog wears a black leash {i} " + "x" * 50, "v1") for i in range(5)]
    task = Task(QUESTION, None)

    def checked(shapes: ToolShapes | None) -> str:
        llm = ScriptedLLM(["Supports: 1"])
        check_answer(Answer(task, "a black leash", "react", evidence=list(evidence)), MeteredChat(llm), shapes)
        return llm.requests[0][0].content

    default = checked(None)  # every span (8 at most), 400 characters of each
    assert "[5]" in default and "x" * 50 in default
    narrow = checked(replace(ToolShapes(), check_spans=2, check_span_chars=30))
    assert "[2]" in narrow and "[3]" not in narrow and "x" * 50 not in narrow
    assert checked(ToolShapes()) == default  # the default shapes are the constants they replaced


def test_every_planner_step_setting_is_an_option_with_its_range_and_listed_none_is_left_in_the_tool_shapes():
    listed = {(option.planner, option.name): option for option in planner_options()}
    moved = {("react", "unusable_replies"): 2, ("react", "failed_steps"): 3, ("mcts", "unusable_replies"): 2,
             ("peil", "unusable_replies"): 2, ("peil", "failed_steps"): 3, ("peil", "step_chars"): 300,
             ("traveler", "opening"): [0.0, 0.25, 0.5, 0.75, 1.0], ("traveler", "answer_chars"): 600,
             ("traveler", "cut_chars"): 160, ("traveler", "summary_tokens"): 40}
    for key, default in moved.items():
        assert listed[key].default == default and listed[key].bounds is not None
    assert listed[("react", "max_steps")].bounds == (1, 50) and listed[("react", "choose_by")].bounds is None
    shapes = set(vars(ToolShapes()))
    assert not shapes & {"unusable_replies", "failed_steps", "peil_step_chars", "traveler_opening",
                         "traveler_answer_chars", "traveler_cut_chars", "traveler_summary_tokens"}
    with pytest.raises(PlannerError, match="opening must be between 0 and 1"):
        build_planner("traveler", {"opening": "0,1.5"})
    with pytest.raises(PlannerError, match="opening must be float"):
        build_planner("traveler", {"opening": "0,half"})
    assert build_planner("peil", {"step_chars": "80"}).step_chars == 80
