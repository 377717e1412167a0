"""``Session.ask`` with each planner over a stored memory built by the real builder with the scripted
perception (tests/fakes), with a scripted chat model so every step is deterministic: the toolbox each
planner gets, the steps streamed as they are made, and the session's clean-up of the chat model (with
the real local model). The real perception under a session is tested in test_first_hour.py and
test_injection.py."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import pytest

from vidagent.agent.planner import Needs, build_planner, default_planner, planner_for
from vidagent.agent.task import Question
from vidagent.agent.steps import MemoryStep, ObservationStep, Step, TaskStep, ToolCallStep
from vidagent.config import Settings
from vidagent.errors import PlannerError
from vidagent.llm.base import Message
from vidagent.session import Session

from fakes import ScriptedLLM

CHOICES = ["a guitar", "a car", "a house", "a cat", "a tree"]


@pytest.fixture()
def settings(scripted) -> Settings:
    return scripted.settings()


def test_react_gets_videoagents_tools_and_streams_each_step(scripted, settings):
    streamed: list[Step] = []
    llm = ScriptedLLM(["no", "Thought: read it\nFinal Answer: a guitar"])
    with scripted.session(llm, memory_selection="llm") as session:
        answer = session.ask(scripted.toy, "What is being drawn?", CHOICES, on_step=streamed.append)
    assert "Does answering it need the space-dominant memory?" in llm.requests[0][-1].content
    system = llm.requests[1][0].content
    for tool in ("caption_retrieval", "segment_localization", "object_memory_querying"):
        assert f"- {tool}(" in system
    assert "visual_question_answering" not in system  # the offline VQA only reads frame descriptions
    assert "- when(" not in system and "sub-task tools" not in system
    assert "2. For counting, or when and where an object" in system  # the rules name tools present (no VQA rule)
    assert [s.id for s in streamed] == [s.id for s in answer.trace] and isinstance(streamed[0], TaskStep)
    selection = streamed[1]  # the memory-selection call is a step of its own, with the model's reply and cost
    assert isinstance(selection, MemoryStep) and selection.action == "selected" and selection.model_output == "no"
    assert selection.text == "memory selection: time-dominant only (the model's choice for this question)"
    assert selection.prompt_tokens > 0 and selection.parent_id == streamed[0].id
    overview = streamed[2]
    assert isinstance(overview, ToolCallStep) and overview.arguments == {"start_segment": 0, "end_segment": 2}
    assert overview.parent_id == selection.id
    assert isinstance(streamed[3], ObservationStep) and "Segment 0 (0.0-2.0 s)" in streamed[3].text
    assert answer.choice_index == 0 and answer.planner == "react"
    assert answer.video_id == streamed[0].sources[0] and answer.video == str(scripted.toy)
    assert all(e.source == answer.video_id for e in answer.evidence) and answer.evidence
    assert answer.usage.llm_calls == 2  # the memory selection and one step


def test_mcts_gets_the_sub_task_tools_and_they_answer_from_the_memory(scripted, settings):
    llm = ScriptedLLM([
        "no",  # the object memory is not needed ahead
        "Thought: ask when\nAction: when\nAction Input: when does the drawing start?",
        "SELECT start_s, end_s FROM segments ORDER BY start_s LIMIT 1",  # the When sub-agent's SQL
        "It starts at 0 s.",  # the When sub-agent's answer
        "Thought: I now know the final answer\nFinal Answer: at the start",
    ])
    with scripted.session(llm, memory_selection="llm") as session:
        answer = session.ask(scripted.toy, "When does the drawing start?", planner="mcts",
                             planner_options={"n": 1, "overview_segments": 0})
    system = llm.requests[1][0].content
    for tool in ("when", "why", "what", "how", "count", "other", "caption_retrieval", "object_memory_querying"):
        assert f"- {tool}(" in system
    assert "The sub-task tools (when, why, what, how, count, other)" in system
    observation = next(s for s in answer.trace if isinstance(s, ObservationStep))
    assert "SQL: SELECT start_s, end_s FROM segments" in observation.text and not observation.is_error
    assert observation.prompt_tokens > 0  # the sub-agent's own calls count on its observation
    assert answer.text == "at the start" and answer.planner == "mcts"
    assert [(e.start_s, e.source) for e in answer.evidence] == [(0.0, answer.video_id)]
    assert answer.usage.llm_calls == 5


def test_mcts_takes_doraemongpts_own_tool_set_and_a_bare_root_by_options(scripted, settings):
    """The paper's setting (issue 24, item 4): the sub-task tools only, the root the question alone."""
    script = ["no", "Thought: ask when\nAction: when\nAction Input: when does the drawing start?",
              "SELECT start_s, end_s FROM segments ORDER BY start_s LIMIT 1", "It starts at 0 s.",
              "Thought: I now know the final answer\nFinal Answer: at the start"]
    llm = ScriptedLLM(list(script))
    with scripted.session(llm, memory_selection="llm") as session:
        answer = session.ask(scripted.toy, "When does the drawing start?", planner="mcts",
                             planner_options={"n": "1", "tools": "doraemongpt", "overview_segments": "0"})
    system = llm.requests[1][0].content
    listed = [line.split("(")[0][2:] for line in system.splitlines() if line.startswith("- ") and "(" in line]
    assert listed == ["when", "why", "what", "how", "count", "other"]
    assert not any(isinstance(s, ToolCallStep) and s.automatic for s in answer.trace)  # no overview read
    assert answer.text == "at the start"
    assert build_planner("mcts", {"tools": "doraemongpt,caption_retrieval"}).tools == (
        "when", "why", "what", "how", "count", "other", "caption_retrieval")
    with pytest.raises(PlannerError, match="overview_segments must be between 0 and 200"):
        build_planner("mcts", {"overview_segments": "-1"})

    kept, dropped = ScriptedLLM(list(script)), ScriptedLLM(list(script))
    with scripted.session(kept) as session:  # today's default keeps the offline frame VQA ...
        session.ask(scripted.toy, "When does the drawing start?", planner="mcts",
                    planner_options={"n": 1, "overview_segments": 0})
    with scripted.session(dropped) as session:  # ... which described_vqa=false leaves out, as ReAct does
        session.ask(scripted.toy, "When does the drawing start?", planner="mcts",
                    planner_options={"n": 1, "overview_segments": 0, "described_vqa": "false"})
    assert "- visual_question_answering(" in kept.requests[1][0].content
    assert "- visual_question_answering(" not in dropped.requests[1][0].content
    assert "- caption_retrieval(" in dropped.requests[1][0].content


def test_a_sub_task_tool_builds_the_object_memory_the_selection_left_out(scripted, settings, tmp_path):
    """The model said the question needs no objects, then the Count tool's SQL reads them: the object
    memory is built before the SQL runs, so the count is over real rows (issue 24, item 2)."""
    import shutil

    home = tmp_path / "home"
    shutil.copytree(settings.home, home)
    llm = ScriptedLLM([
        "no",
        "Thought: count\nAction: count\nAction Input: how many people are there?",
        "SELECT COUNT(DISTINCT object_id) AS n FROM objects WHERE category = 'person'",
        "There is 1 person.",
        "Thought: I now know the final answer\nFinal Answer: 1",
    ])
    with scripted.session(llm, home=home, memory_selection="llm") as session:
        before = session.library.stage_names(session.index(scripted.toy, ["segments"], progress=False)
                                             .video_id)
        answer = session.ask(scripted.toy, "How many people are there?", planner="mcts",
                             planner_options={"n": 1, "tools": "doraemongpt"})
        after = session.library.stage_names(answer.video_id)
    assert "objects" not in before and "objects" in after
    observation = next(s for s in answer.trace if isinstance(s, ObservationStep))
    assert not observation.is_error and "n\n1" in observation.text and answer.text == "1"


def test_caption_only_builds_no_tools_and_asks_nothing_about_objects(scripted, settings):
    llm = ScriptedLLM(["Answer: a guitar"])
    with scripted.session(llm) as session:
        answer = session.ask(scripted.toy, "What is being drawn?", CHOICES, planner="caption_only")
        note = session.perception.describer.memory_note
    assert len(llm.requests) == 1 and answer.choice_index == 0  # no memory-selection call
    assert note and note in llm.requests[0][0].content  # the describer says what wrote the descriptions
    # said once in the system prompt's note, not repeated by each segment
    assert "not a caption]" not in llm.requests[0][-1].content and "[0.0-2.0 s]" in llm.requests[0][-1].content


def test_random_needs_no_memory_and_no_model(scripted, tmp_path):
    settings = Settings(home=tmp_path, models=tmp_path / "no-models")
    with scripted.session(ScriptedLLM([])) as session:
        asked = Question("What is drawn?", tuple(CHOICES), id="q1")
        first = session.ask(scripted.toy, asked, planner="random")
        again = session.ask(scripted.toy, asked, planner="random")
        window = session.ask(scripted.toy, Question("When is the guitar drawn?", wants_time=True),
                             planner="random")
    assert first.choice_index == again.choice_index is not None
    begin, end = (float(x) for x in window.text.split(" - "))
    assert 0 <= begin < end <= 5.1
    assert not (tmp_path / "library.sqlite").exists()  # nothing was indexed


def test_a_planner_gets_what_its_needs_declare_and_no_model_when_it_needs_none(scripted, tmp_path):
    @dataclass
    class Sneaky:  # declares it needs no model, then calls one
        name: ClassVar[str] = "sneaky"
        needs: ClassVar[Needs] = Needs(memory=False, llm=False)

        def run(self, task, toolbox, llm, trace=None):
            assert toolbox.tools == {} and not toolbox.memories and toolbox.video.duration_s > 4
            assert toolbox.video.segment_count == 0 and toolbox.video.segment_seconds == settings.segment_seconds
            llm.chat([Message("user", "hi")])

    # an uninstalled model: loading it would fail, so these questions show none is loaded
    settings = Settings(home=tmp_path, models=tmp_path / "no-models")
    with Session(settings) as session:
        assert session.ask(scripted.toy, "What?", CHOICES, planner="random").choice_index is not None
        with pytest.raises(PlannerError, match="the sneaky planner declared it needs no chat model, and called one"):
            session.ask(scripted.toy, "What?", planner=Sneaky())
        with pytest.raises(PlannerError, match="the random planner answers about one video, and was given 2 sources"):
            session.ask([scripted.toy, scripted.text], "What?", CHOICES,
                        planner="random")


def test_one_rule_picks_the_planner_when_none_is_named():
    assert default_planner(["video"]) == "react"
    assert default_planner(["video"], embedded=True) == "caption_only"  # the embedded model reads chosen lines
    assert default_planner(["video", "video"], embedded=True) == "peil"
    default = planner_for(None, {"lines": "3"}, ["video"], embedded=True)
    assert (default.name, default.lines, default.choose_by, default.select) == ("caption_only", 3, "auto", "even")
    assert planner_for("caption_only", None, ["video"], embedded=True).lines == 0  # a named planner: its own defaults
    assert planner_for(None, None, ["video"]).name == "react"
    assert default_planner(["image"]) == default_planner(["video", "video"]) == default_planner(["video", "image"]) \
        == "peil"
    peil = build_planner("peil").needs
    assert peil.images and peil.max_sources is None and peil.modules
    peil.check("peil", ["video", "image", "image"])  # takes them all
    with pytest.raises(PlannerError, match="answers about one video, and was given an image"):
        build_planner("react").needs.check("react", ["image"])


def test_a_planner_says_how_many_lines_it_reads_where_it_reads_them_evenly_whatever_the_question():
    assert planner_for(None, None, ["video"], embedded=True).needs.lines_read == 5  # the default: 5 lines
    assert build_planner("caption_only", {"lines": 4, "samples": 3, "choose_by": "likelihood"}).needs.lines_read == 12
    for options in ({}, {"lines": 5, "select": "query"}, {"lines": 5, "line_seconds": 10}):  # every line, or chosen
        assert build_planner("caption_only", options).needs.lines_read is None, options
    assert build_planner("react").needs.lines_read is None and build_planner("traveler").needs.lines_read is None


def test_the_session_defaults_by_its_chat_model(tmp_path):
    settings = Settings(home=tmp_path, models=tmp_path / "no-models")
    with Session(settings) as session:
        assert session.embedded_llm  # the settings' backend is the local one; nothing is loaded to tell
    with Session(settings, llm=ScriptedLLM([])) as session:
        assert not session.embedded_llm  # a model given to the session is asked what it is


def test_unknown_planners_and_options_are_clear_errors(scripted, settings):
    with scripted.session(ScriptedLLM(["no"])) as session:  # "no": the memory selection, before the tools
        with pytest.raises(PlannerError, match="unknown planner 'tot'"):
            session.ask(scripted.toy, "What?", planner="tot")
        with pytest.raises(PlannerError, match="has no option 'depth'"):
            session.ask(scripted.toy, "What?", planner="react", planner_options={"depth": 3})
        with pytest.raises(PlannerError, match="no tool named whn; the tools are: caption_retrieval"):
            session.ask(scripted.toy, "What?", planner="mcts", planner_options={"tools": "when,whn"})
        with pytest.raises(PlannerError, match="planner_options go with a planner's name"):
            session.ask(scripted.toy, "What?", planner=build_planner("react"), planner_options={"n": 1})


@pytest.mark.models
def test_close_frees_the_chat_model_and_its_cache_but_not_one_passed_in(tmp_path, models_dir):
    from vidagent.models.install import installed_models

    if "smollm2-135m" not in installed_models(models_dir):
        pytest.skip("smollm2-135m is not installed")
    settings = Settings(home=tmp_path, models=models_dir).with_llm(model="smollm2-135m", threads=1)
    session = Session(settings)
    llm = session.llm
    llm.chat([Message("user", "Hi")], max_tokens=2)
    assert llm.backend._server is not None
    session.close()
    assert llm.backend._server is None
    with pytest.raises(Exception, match="closed"):
        len(llm.cache)
    passed_in = ScriptedLLM([])
    with Session(settings, llm=passed_in) as borrowed:
        assert borrowed.llm is passed_in
    assert borrowed.llm is passed_in  # a caller's model is the caller's to close


@pytest.mark.parametrize("planner, option, value, message", [
    ("mcts", "n", "1000000", "option n must be between 1 and 64"),
    ("mcts", "max_depth", "1e9", "option max_depth must be int"),
    ("mcts", "max_depth", "1000", "option max_depth must be between 1 and 50"),
    ("mcts", "expansion_temperature", "nan", "option expansion_temperature must be between 0 and 2"),
    ("caption_only", "context_tokens", "-1", r"option context_tokens must be between 256 and 1e\+06"),
    ("caption_only", "line_seconds", "NaN", "option line_seconds must be between 0 and 3600"),
    ("peil", "attempts", "-1", "option attempts must be between 1 and 10"),
    ("traveler", "confidence", "inf", "option confidence must be between 0 and 1"),
])
def test_every_planner_option_is_bounded_where_a_face_builds_it(planner, option, value, message):
    """Issue 41: `mcts n=1000000` and the like held the model lane until restart; NaN ended as a JSON error."""
    with pytest.raises(PlannerError, match=message):
        build_planner(planner, {option: value})
    assert build_planner("caption_only", {"context_tokens": "None"}).context_tokens is None  # None stays allowed
