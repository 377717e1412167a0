"""A question's stages (``vidagent.agent.inquiry``), one at a time, over the scripted home: each reads what the
stages before it made and adds its part; ``Session.ask`` is these stages in order."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from vidagent.agent.answer import Answer, Candidate
from vidagent.agent.confidence import BUDGET_CAP
from vidagent.agent.inquiry import (STAGES, Inquiry, answer_inquiry, asked_question, check_evidence, check_needs,
                                    choose_planner, choose_vqa, judge_confidence, judge_sight, learn, open_the_sources,
                                    prepare, report_budget, report_coverage, run_guarded)
from vidagent.agent.planning import Needs, NoChatModel
from vidagent.agent.steps import FinalAnswerStep, MemoryStep, Trace
from vidagent.agent.task import Question
from vidagent.errors import PlannerError, VidagentError, VideoError
from vidagent.llm.budget import Budget, BudgetSpentError
from vidagent.llm.metered import MeteredChat
from vidagent.tools.vqa import DescribedFramesVQA, FrameBudgetVQA, VisionChatVQA

from fakes import ScriptedLLM

CHOICES = ["a guitar", "a car"]


@pytest.fixture()
def session(scripted):
    with scripted.session(ScriptedLLM([])) as opened:
        yield opened


def _through(inquiry: Inquiry, session, last) -> Inquiry:
    """``inquiry`` after the stages up to and including ``last``."""
    for stage in STAGES[: STAGES.index(last) + 1]:
        stage(inquiry, session)
    return inquiry


def test_the_question_is_one_value_and_its_options_come_one_way():
    assert asked_question("What is drawn?", CHOICES) == Question("What is drawn?", tuple(CHOICES))
    assert asked_question("What is drawn?", []).choices is None
    given = Question("What is drawn?", ("a", "b"), id="q1")
    assert asked_question(given, None) is given
    with pytest.raises(TypeError, match="inside the Question"):
        asked_question(given, CHOICES)
    with pytest.raises(PlannerError, match="planner_options go with a planner's name"):
        Inquiry("x.mp4", given, planner_asked=SimpleNamespace(name="p"), planner_options={"n": 1})


def test_a_stage_read_before_it_ran_says_so():
    inquiry = Inquiry("x.mp4", Question("q"))
    with pytest.raises(AttributeError):
        inquiry.planner
    assert dict(inquiry.memories) == {} and inquiry.replay is None


def test_the_sources_are_opened_first_and_a_file_given_twice_is_refused(scripted, session):
    inquiry = _through(Inquiry([scripted.toy, scripted.text], Question("q")), session, open_the_sources)
    assert [str(handle.path) for handle in inquiry.handles] == [str(scripted.toy), str(scripted.text)]
    assert inquiry.kinds == ["video", "video"]
    with pytest.raises(VideoError, match="the same file as"):
        open_the_sources(Inquiry([scripted.toy, scripted.toy], Question("q")), session)
    with pytest.raises(VideoError, match="no video or image was given"):
        open_the_sources(Inquiry([], Question("q")), session)


def test_the_planner_is_the_one_named_or_the_default_for_the_sources(scripted, session):
    named = _through(Inquiry(scripted.toy, Question("q"), planner_asked="mcts", planner_options={"n": 1}),
                     session, choose_planner)
    assert named.planner.name == "mcts" and named.planner.n == 1
    assert _through(Inquiry(scripted.toy, Question("q")), session, choose_planner).planner.name == "react"
    several = _through(Inquiry([scripted.toy, scripted.text], Question("q")), session, choose_planner)
    assert several.planner.name == "peil"


def test_needs_refuse_sources_the_planner_cannot_take_before_anything_is_read(scripted, session):
    with pytest.raises(PlannerError, match="the react planner answers about one video"):
        _through(Inquiry([scripted.toy, scripted.text], Question("q"), planner_asked="react"), session, check_needs)
    with pytest.raises(PlannerError, match="cannot use knowledge"):
        _through(Inquiry(scripted.toy, Question("q"), planner_asked="random", knowledge=["notes.md"]), session,
                 check_needs)
    assert _through(Inquiry(scripted.toy, Question("q")), session, check_needs).opened_knowledge == []


def test_preparing_meters_the_model_under_the_budget_and_names_whose_experience(scripted, session):
    inquiry = _through(Inquiry([scripted.text, scripted.toy], Question("q", tuple(CHOICES)), planner_asked="peil",
                               budget="calls=3,frames=4", experience="none"), session, prepare)
    ids = [source.id for source in inquiry.task.sources]
    assert inquiry.key == "+".join(sorted(ids)) and inquiry.task.choices == tuple(CHOICES)
    assert inquiry.llm.meter.budget == Budget(calls=3, frames=4) and inquiry.llm.model is session.llm
    assert inquiry.keeper is None and inquiry.trace.last is None
    without = _through(Inquiry(scripted.toy, Question("q", tuple(CHOICES)), planner_asked="random",
                               experience="all"), session, prepare)
    assert isinstance(without.llm.model, NoChatModel) and without.llm.meter is None
    assert without.keeper is None  # a planner without a chat model neither recalls nor learns


@dataclass
class _Spender:
    """A planner that spends its budget as soon as it runs."""

    name: str = "spender"
    needs: Needs = Needs(memory=False, llm=False)

    def run(self, task, toolbox, llm, trace=None) -> Answer:
        raise BudgetSpentError("its budget of 0 calls is spent")


def test_a_budget_spent_in_the_run_ends_in_the_answer_reached(scripted, session):
    inquiry = _through(Inquiry(scripted.toy, Question("q", tuple(CHOICES)), planner_asked=_Spender()), session,
                       run_guarded)
    final = inquiry.answer.trace.last
    assert isinstance(final, FinalAnswerStep) and final.how == "budget"
    assert inquiry.answer.planner == "spender" and "no answer was reached" in inquiry.answer.abstained


def test_the_run_answers_in_the_workspace_and_keeps_the_memories_it_read(scripted):
    llm = ScriptedLLM(["Answer: 1"])
    with scripted.session(llm) as session:
        inquiry = _through(Inquiry(scripted.toy, Question("q", tuple(CHOICES)), planner_asked="caption_only"),
                           session, run_guarded)
    assert list(inquiry.memories) == [source.id for source in inquiry.task.sources]
    assert inquiry.answer.planner == "caption_only" and inquiry.answer.choice_index == 1
    assert inquiry.answer.task is inquiry.task and len(llm.requests) == 1


def _answered(**artifacts) -> Inquiry:
    inquiry = Inquiry("x.mp4", Question("q"))
    inquiry.task = Question("q").about(())
    inquiry.answer = Answer(task=inquiry.task, text="a guitar", planner="react", artifacts=dict(artifacts),
                            trace=Trace())
    inquiry.planner = SimpleNamespace(name="react", needs=Needs())
    return inquiry


def test_coverage_is_reported_only_for_memories_a_glance_left_partial():
    inquiry = _answered()
    partial = SimpleNamespace(coverage=SimpleNamespace(report=lambda: {"text": "saw 3 of 10 frames"}))
    inquiry.memories = {"v1": partial, "v2": SimpleNamespace(coverage=None)}
    report_coverage(inquiry, None)
    assert inquiry.answer.artifacts["coverage"] == {"v1": {"text": "saw 3 of 10 frames"}}
    whole = _answered()
    whole.memories = {"v2": SimpleNamespace(coverage=None)}
    report_coverage(whole, None)
    assert "coverage" not in whole.answer.artifacts


def test_the_evidence_check_runs_only_where_asked_and_a_model_is_there():
    resources = SimpleNamespace(settings=SimpleNamespace(check=False))
    inquiry = _answered()
    inquiry.llm = MeteredChat(ScriptedLLM([]))  # no reply: a check would fail here
    before = inquiry.answer
    check_evidence(inquiry, resources)
    inquiry.check = True
    inquiry.planner = SimpleNamespace(name="random", needs=Needs(llm=False))
    check_evidence(inquiry, resources)
    assert inquiry.answer is before and before.check is None


def test_the_budget_report_says_what_was_spent_and_whether_it_stopped_the_planner():
    inquiry = _answered()
    inquiry.llm = MeteredChat(ScriptedLLM(["fine"]), budget=Budget(calls=2))
    inquiry.llm.chat([])
    inquiry.answer.trace.add(FinalAnswerStep(answer="a guitar", how="budget"))
    report_budget(inquiry, None)
    assert inquiry.answer.artifacts["budget"]["stopped"] is True
    assert inquiry.answer.artifacts["budget"]["limit"] == {"calls": 2}
    assert inquiry.answer.artifacts["budget"]["spent"]["calls"] == 1
    unbounded = _answered()
    unbounded.llm = MeteredChat(ScriptedLLM([]))
    report_budget(unbounded, None)
    assert "budget" not in unbounded.answer.artifacts


def test_a_budget_stopped_answer_is_never_sure_and_one_below_the_threshold_abstains_keeping_its_guess():
    inquiry = _answered(budget={"stopped": True})
    inquiry.answer.candidates = [Candidate("a guitar", votes=3)]  # unanimous votes: 1.0 before the cap
    assert inquiry.answer.confidence == BUDGET_CAP
    judge_confidence(inquiry, SimpleNamespace(settings=SimpleNamespace(min_confidence=0.0)))
    assert not inquiry.answer.abstained  # no threshold set
    judge_confidence(inquiry, SimpleNamespace(settings=SimpleNamespace(min_confidence=0.5)))
    assert inquiry.answer.abstained == "its confidence (40%) is below the threshold set (50%)"
    assert inquiry.answer.text == "a guitar" and inquiry.answer.confidence == 0.0
    sure = _answered()
    sure.answer.candidates = [Candidate("a guitar", votes=3)]
    judge_confidence(sure, SimpleNamespace(settings=SimpleNamespace(min_confidence=0.5)))
    assert not sure.answer.abstained and sure.answer.confidence == 1.0
    unmeasured = _answered()  # an open answer of one chain has no confidence: nothing to judge
    judge_confidence(unmeasured, SimpleNamespace(settings=SimpleNamespace(min_confidence=0.9)))
    assert not unmeasured.answer.abstained


def test_a_lesson_that_cannot_be_kept_costs_the_memory_not_the_answer():
    class Forgetful:
        def learn(self, *args) -> None:
            raise VidagentError("the model went away")

    inquiry = _answered()
    inquiry.keeper, inquiry.key, inquiry.llm = Forgetful(), "v1", MeteredChat(ScriptedLLM([]))
    learn(inquiry, None)
    step = inquiry.answer.trace.last
    assert isinstance(step, MemoryStep) and step.action == "not kept" and step.text == "the model went away"
    assert inquiry.answer.text == "a guitar"


def test_the_stages_run_in_order_over_one_inquiry():
    seen: list[str] = []

    def stage(name):
        def run(inquiry, resources):
            seen.append(name)
            inquiry.answer = name
        return run

    assert answer_inquiry(Inquiry("x.mp4", Question("q")), None, [stage("a"), stage("b")]) == "b"
    assert seen == ["a", "b"]
    assert [stage.__name__ for stage in STAGES] == [
        "open_the_sources", "choose_planner", "check_needs", "prepare", "run_guarded", "report_coverage",
        "judge_sight", "check_evidence", "rate_open_answer", "report_budget", "calibrate", "judge_confidence", "learn"]


class _Seeing(ScriptedLLM):
    supports_images = True


def test_the_vqa_is_the_configured_one_else_the_model_itself_else_described_frames():
    settings = SimpleNamespace(tools=SimpleNamespace(vision_frames=4))
    asked: list[str] = []

    def describer():
        asked.append("describer")
        return SimpleNamespace(name="captions", describe=lambda frames: ["a frame"] * len(frames))

    configured = SimpleNamespace(answer=lambda question, frames: None, sees_frames=True)
    assert choose_vqa(ScriptedLLM([]), configured, settings, describer) is configured
    assert isinstance(choose_vqa(_Seeing([]), None, settings, describer), VisionChatVQA)
    assert asked == []  # the describer is asked for only when the frames are read as descriptions
    assert isinstance(choose_vqa(ScriptedLLM([]), None, settings, describer), DescribedFramesVQA)
    assert asked == ["describer"]
    held = choose_vqa(MeteredChat(_Seeing([]), budget=Budget(frames=2)), None, settings, describer)
    assert isinstance(held, FrameBudgetVQA)
    assert not isinstance(choose_vqa(MeteredChat(_Seeing([]), budget=Budget(calls=2)), None, settings, describer),
                          FrameBudgetVQA)


def test_the_session_asks_through_the_shared_vqa_choice(scripted):
    with scripted.session(_Seeing([])) as session:
        assert isinstance(session.vqa(session.llm), VisionChatVQA)
    with scripted.session(ScriptedLLM([])) as session:
        assert isinstance(session.vqa(MeteredChat(session.llm, budget=Budget(frames=1))), FrameBudgetVQA)



def test_a_question_the_memory_cannot_see_abstains_saying_so_and_keeps_its_guess():
    inquiry = _answered()
    inquiry.task = Question("What is the woman doing?").about(())
    inquiry.memories = {"v1": SimpleNamespace(captioned=False, on_screen_text=[], speech=[])}
    judge_sight(inquiry, None)
    assert inquiry.answer.abstained.startswith("the offline memory does not see actions")
    assert inquiry.answer.text == "a guitar"
    seen = _answered()
    seen.memories = {"v1": SimpleNamespace(captioned=True, on_screen_text=[], speech=[])}
    seen.task = Question("What is the woman doing?").about(())
    judge_sight(seen, None)
    assert not seen.answer.abstained
