"""The catalogue's contract (vidagent.tools.catalogue): every tool and module the workspace builds is
declared in its form and only there; what a capability declares it refines, it refines on a glanced
memory, and what it does not, it does not; sources without frames or speech withhold what needs them;
a tool whose declared parameters its function does not take is refused when it is made."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest
from fakes.library import fake_settings
from fakes.llm import ScriptedLLM
from fakes.perception import long_clip, scripted_perception, write_clip

from vidagent.agent.planning import Needs
from vidagent.agent.workspace import open_workspace
from vidagent.errors import PlannerError
from vidagent.memory.glance import Glance
from vidagent.session import Session
from vidagent.tools import catalogue
from vidagent.tools.base import Observation, Parameter, Tool
from vidagent.tools.media import video_media
from vidagent.video.video import Video

EVERYTHING = Needs(tools=None, modules=True, max_sources=None)

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
