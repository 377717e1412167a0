"""The catalogue's contract (vidagent.tools.catalogue): every tool and module the workspace builds is
declared in its form and only there; what a capability declares it refines, it refines on a glanced
memory, and what it does not, it does not; every tool and module calls exactly the capabilities
(vidagent.tools.capabilities) it declares it is a form of, and the segment-id and visual[i] forms of one
capability reach the same function; sources without frames or speech withhold what needs them; a tool
whose declared parameters its function does not take is refused when it is made."""

from __future__ import annotations

import itertools
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
from fakes import perception as fake_perception
from fakes.library import fake_settings
from fakes.llm import ScriptedLLM
from fakes.perception import long_clip, scripted_perception, write_clip

from vidagent.agent.planner import build_planner
from vidagent.agent.planning import Needs
from vidagent.agent.react import VIDEOAGENT_TOOLS
from vidagent.agent.react_steps import offered_tools
from vidagent.agent.workspace import open_workspace
from vidagent.errors import PlannerError
from vidagent.memory.glance import Glance
from vidagent.prompts import load_prompt
from vidagent.session import Session
from vidagent.tools import capabilities, catalogue
from vidagent.tools.base import Observation, Parameter, Tool
from vidagent.tools.declaration import declarations, declared, made
from vidagent.tools.media import frame_media, video_media
from vidagent.video.video import Video

EVERYTHING = Needs(tools=catalogue.names(form="segments"), modules=True, max_sources=None)

# a call of each capability over a stretch the glance has not described in full (ten 6-s scenes, 2-s segments)
SEGMENT_CALLS = {
    "caption_retrieval": {"start_segment": 8, "end_segment": 10},
    "segment_localization": {"description": "a clock"},
    "visual_question_answering": {"question": "What is on the table?", "segment_id": 9},
    "frame_description": {"start_s": 16.0, "end_s": 20.0},
    "frame_question_answering": {"question": "What is on the table?", "start_s": 16.0, "end_s": 20.0},
}
MODULE_CALLS = {  # (query, the stretch of the video as the source)
    "video_narration": (None, (48.0, 54.0)),
    "text_detect": (None, (18.0, 24.0)),
    "narration_ground": ("a book", (6.0, 12.0)),  # a stretch read whole (a wide one is skimmed)
    "narration_reason": ("What is on the table?", (30.0, 36.0)),
    "asr": (None, (12.0, 18.0)),
    "subtitle_ground": ("the clock", (0.0, 60.0)),
    "temporal_reason": ("after: 40", (0.0, 60.0)),
}
FORM_CALLS = {  # more calls of a module, each (query, the stretch as the source; a time: the frame there)
    "subtitle_reason": [("What is said about the clock?", (0.0, 60.0))],
    "caption": [("What is on the table?", 21.0), ("", 21.0)],  # asks a question; describes
    **{name: [call] for name, call in MODULE_CALLS.items()},
}
# a capability that calls another (the forms of the outer one reach the inner one through it)
NESTED = {"look_and_ask": {"ask_frames"}}


@contextmanager
def fresh_session(folder: Path):
    """A session in its own library over the long scripted clip, nothing indexed yet."""
    clip = long_clip()
    video = Video(write_clip(clip, folder / "videos"))
    llm = ScriptedLLM(["a clock"] * 10)
    with Session(fake_settings(folder / "home"), llm=llm, perception=scripted_perception(clip)) as session:
        yield session, video, llm


def test_every_tool_and_module_built_is_declared_in_its_form_and_every_declared_one_is_built(tmp_path):
    with fresh_session(tmp_path) as (session, video, llm), \
            open_workspace(EVERYTHING, "What is on the table?", [video], session, llm, glance=0) as toolbox:
        assert set(toolbox.tools) == set(catalogue.names(form="segments"))
        assert set(toolbox.assist.modules) == set(catalogue.names(form="source"))
    assert catalogue.names(form="segments", reads="objects", offered=True) == \
        ("object_memory_querying", "when", "why", "what", "how", "count", "other")


def test_a_planner_taking_every_tool_is_handed_only_the_offered_ones_and_a_named_one_besides(tmp_path):
    react = build_planner("react", {"tools": "none"})
    assert react.needs.tools is None
    with fresh_session(tmp_path) as (session, video, llm):
        with open_workspace(react.needs, "What is on the table?", [video], session, llm, glance=0) as toolbox:
            handed = offered_tools(toolbox, "ReAct", described_vqa=True).names
        named = ("caption_retrieval", "export_clip")
        with open_workspace(Needs(tools=named), "What is on the table?", [video], session, llm, glance=0) as toolbox:
            assert tuple(toolbox.names) == named
    assert handed == list(catalogue.names(form="segments", offered=True))
    assert not {"export_clip", "export_frames", "highlight_object", "remove_object", "refer_object"} & set(handed)


def test_a_tool_is_declared_on_its_function_and_the_catalogue_gathers_the_declarations():
    class Builder:
        @declared("segments", "descriptions", of="read_span", sets="mine", does="overview")
        def read(self, start: int) -> Observation:
            return Observation(f"read {start}")

        def stray(self, start: int) -> Observation:
            return Observation("")

    builder = Builder()
    tool = made(builder.read, "reads", (Parameter("start", int, "a segment"),))
    assert tool.name == "read" and tool("3").text == "read 3"
    assert [(d.name, d.sets, d.does) for d in declarations(Builder)] == [("read", {"mine"}, {"overview"})]
    with pytest.raises(TypeError, match="stray"):
        made(builder.stray, "", (Parameter("start", int, ""),))
    # the planners' defaults and jobs are read off the declarations, not written as names
    assert catalogue.tool_sets()["videoagent"] == VIDEOAGENT_TOOLS
    assert catalogue.doing("overview") == "caption_retrieval"
    # the overview step written in the model's name calls the tool declared for it (the prompt keeps its text, so
    # that an evaluation run's prompts digest stays the same)
    assert f"Action: {catalogue.doing('overview')}\n" in load_prompt("vidagent.agent", "overview_step")
    assert catalogue.doing("looks_first", accepts="image") == "caption"
    assert catalogue.doing("looks_first", accepts="clip") == "video_narration"
    with pytest.raises(PlannerError, match="0 tools declare the job 'juggles'"):
        catalogue.doing("juggles")


@pytest.mark.parametrize("name", sorted(SEGMENT_CALLS))
def test_a_tool_refines_a_glanced_memory_exactly_when_it_declares_so(tmp_path, name):
    with fresh_session(tmp_path) as (session, video, llm), \
            open_workspace(Needs(tools=(name,)), "What is on the table?", [video], session, llm,
                           glance=10.0) as toolbox:
        observation = toolbox.call(name, SEGMENT_CALLS[name])
    assert not observation.is_error, observation.text
    assert ("refined" in observation.artifacts) is catalogue.CATALOGUE[name].refines


@pytest.mark.parametrize("name", sorted(MODULE_CALLS))
def test_a_module_refines_a_glanced_memory_exactly_when_it_declares_so(tmp_path, name):
    query, (start, end) = MODULE_CALLS[name]
    with fresh_session(tmp_path) as (session, video, llm):
        memory = Glance(session.builder(), video, 10.0, speech=True).open()
        with open_workspace(Needs(tools=(), modules=True, max_sources=None), "?", [video], session, llm,
                            glance=0) as toolbox:
            module = toolbox.assist.modules[name]
            observation = module.function(query, video_media(memory).clip(start, end))
    assert not observation.is_error, observation.text
    assert ("refined" in observation.artifacts) is catalogue.CATALOGUE[name].refines


def test_every_capability_that_refines_has_its_contract_case():
    refining = {c.name for c in catalogue.CATALOGUE.values() if c.refines}
    assert refining <= set(SEGMENT_CALLS) | set(MODULE_CALLS)


def test_sources_without_frames_or_speech_withhold_what_needs_them():
    assert catalogue.unservable("segments", pixels=False, speech=True) == ("object_memory_querying",)
    assert catalogue.unservable("segments", pixels=True, speech=False) == ()
    no_frames = catalogue.unservable("source", pixels=False, speech=True)
    assert set(no_frames) == {"caption", "object_detect", "text_detect", "region_ground", "text_ground", "get_frame"}
    no_speech = catalogue.unservable("source", pixels=True, speech=False)
    assert set(no_speech) == {"asr", "subtitle_ground", "subtitle_reason"}


def test_a_tool_outside_the_catalogue_or_in_another_form_is_refused():
    stray = Tool("fly_drone", "flies a drone", (), lambda: Observation("up"))
    with pytest.raises(PlannerError, match="fly_drone"):
        catalogue.check_declared([stray], "segments")
    narration = Tool("video_narration", "narrates", (), lambda: Observation("..."))
    with pytest.raises(PlannerError, match="video_narration"):
        catalogue.check_declared([narration], "segments")
    catalogue.check_declared([narration], "source")


def test_a_tool_whose_declared_parameters_its_function_does_not_take_is_refused_when_made():
    def count(question: str, limit: int) -> Observation:
        return Observation(question * limit)

    with pytest.raises(TypeError, match="declares questoin"):
        Tool("count", "counts", (Parameter("questoin", str, "typo"), Parameter("limit", int, "n")), count)
    with pytest.raises(TypeError, match="does not declare limit"):
        Tool("count", "counts", (Parameter("question", str, "q"),), count)
    made = Tool("count", "counts", (Parameter("question", str, "q"), Parameter("limit", int, "n")), count)
    assert made(made.parse_arguments({"question": "ab", "limit": 2})).text == "abab"


@pytest.fixture()
def palette_kept(monkeypatch):
    """These tests make clips of their own; the colours (and voices) later tests' clips are given stay as
    they were without them (tests/memory/test_glance.py's keyframe checks depend on those colours)."""
    for counter in ("_colours", "_voices"):
        position = int(re.fullmatch(r"count\((\d+)\)", repr(getattr(fake_perception, counter))).group(1))
        monkeypatch.setattr(fake_perception, counter, itertools.count(position))


class CapabilitySpy:
    """Wraps every capability (vidagent.tools.capabilities.CAPABILITIES): ``called`` names those a tool
    or module called itself, ``reached`` every one that ran (through another one, too)."""

    def __init__(self, monkeypatch) -> None:
        self.called: set[str] = set()
        self.reached: set[str] = set()
        self._depth = 0
        for name, function in capabilities.CAPABILITIES.items():
            monkeypatch.setattr(capabilities, function.__name__, self._spy(name, function))

    def _spy(self, name, function):
        def spy(*args, **kwargs):
            if self._depth == 0:
                self.called.add(name)
            self.reached.add(name)
            self._depth += 1
            try:
                return function(*args, **kwargs)
            finally:
                self._depth -= 1
        return spy

    def take(self) -> tuple[set[str], set[str]]:
        """What was called and reached since the last take."""
        taken = (set(self.called), set(self.reached))
        self.called.clear()
        self.reached.clear()
        return taken


def _reaches(names) -> set[str]:
    return set(names).union(*(NESTED.get(name, set()) for name in names))


def _declared(names) -> dict[str, tuple[set[str], set[str]]]:
    return {name: (set(catalogue.CATALOGUE[name].capabilities), _reaches(catalogue.CATALOGUE[name].capabilities))
            for name in names}


def test_every_tool_calls_exactly_the_capabilities_it_is_declared_a_form_of(tmp_path, monkeypatch, palette_kept):
    spy = CapabilitySpy(monkeypatch)
    seen = {}
    with fresh_session(tmp_path) as (session, video, llm), \
            open_workspace(Needs(tools=tuple(SEGMENT_CALLS)), "What is on the table?", [video], session, llm,
                           glance=10.0) as toolbox:
        for name, arguments in SEGMENT_CALLS.items():
            observation = toolbox.call(name, arguments)
            assert not observation.is_error, f"{name}: {observation.text}"
            seen[name] = spy.take()
    assert seen == _declared(SEGMENT_CALLS)


def test_every_module_calls_exactly_the_capabilities_it_is_declared_a_form_of(tmp_path, monkeypatch, palette_kept):
    spy = CapabilitySpy(monkeypatch)
    seen = {}
    with fresh_session(tmp_path) as (session, video, llm):
        media = video_media(Glance(session.builder(), video, 10.0, speech=True).open())
        with open_workspace(Needs(tools=(), modules=True, max_sources=None), "?", [video], session, llm,
                            glance=0) as toolbox:
            for name, calls in FORM_CALLS.items():
                for query, where in calls:
                    source = frame_media(media, where) if isinstance(where, float) else media.clip(*where)
                    observation = toolbox.assist.modules[name].function(query, source)
                    assert not observation.is_error, f"{name}: {observation.text}"
                seen[name] = spy.take()
    assert seen == _declared(FORM_CALLS)


def test_every_declared_capability_is_written_once_and_both_forms_reach_the_shared_ones():
    for name, function in capabilities.CAPABILITIES.items():
        assert function.__name__ == name and getattr(capabilities, name) is function
    declared = {c.name: _reaches(c.capabilities) for c in catalogue.CATALOGUE.values()}
    assert set().union(*declared.values()) == set(capabilities.CAPABILITIES)
    forms = {name: {c.form for c in catalogue.CATALOGUE.values() if name in declared[c.name]}
             for name in capabilities.CAPABILITIES}
    # the segment-id tool and the visual[i] module of each of these format one function's result
    assert {name for name, reached in forms.items() if reached == {"segments", "source"}} == \
        {"read_span", "localise", "describe", "ask_frames"}
    assert catalogue.CATALOGUE["caption_retrieval"].capabilities == catalogue.CATALOGUE["video_narration"].capabilities
    assert catalogue.CATALOGUE["segment_localization"].capabilities == \
        catalogue.CATALOGUE["narration_ground"].capabilities
    # every tool and module with a call case is checked against its declaration above
    assert {c.name for c in catalogue.CATALOGUE.values() if c.capabilities} <= set(SEGMENT_CALLS) | set(FORM_CALLS)
