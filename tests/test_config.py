"""Settings: explicit overrides (what the command-line flags set) on top of the environment."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from vidagent.config import Settings


def test_overrides_set_only_what_was_given():
    base = Settings.from_env({"VIDAGENT_HOME": "/data/vidagent", "VIDAGENT_LLM_MODEL": "qwen2.5-0.5b"})
    assert base.with_overrides() == base
    assert base.with_overrides(home=None, base_url="", model=None, api_key=None, cache=None) == base
    changed = base.with_overrides(home="~/elsewhere", base_url="http://localhost:8000/v1", model="gpt-4o-mini",
                                  api_key="sk-test", cache=False)
    assert changed.home == Path("~/elsewhere").expanduser()
    assert (changed.llm.backend, changed.llm.base_url, changed.llm.model, changed.llm.api_key, changed.llm.cache) == (
        "openai", "http://localhost:8000/v1", "gpt-4o-mini", "sk-test", False)
    assert changed.llm.timeout_s == base.llm.timeout_s and changed.backends == base.backends
    assert base.with_overrides(model="smollm2-135m").llm == base.with_llm(model="smollm2-135m").llm
    assert base.with_overrides(model="smollm2-135m").llm.backend == "local"  # a model alone keeps the backend



def test_memory_selection_is_set_by_the_environment_and_the_ask_command():
    import argparse

    import pytest

    from vidagent.cli import _settings, build_parser
    from vidagent.errors import VidagentError

    assert Settings.from_env({}).memory_selection == "tools"
    assert Settings.from_env({"VIDAGENT_MEMORY_SELECTION": " All "}).memory_selection == "all"
    with pytest.raises(VidagentError, match="memory selection must be one of tools, llm, all, not 'some'"):
        Settings.from_env({"VIDAGENT_MEMORY_SELECTION": "some"})
    args = build_parser().parse_args(["ask", "clip.mp4", "How many dogs?", "--memory-selection", "all"])
    assert _settings(args).memory_selection == "all"
    assert _settings(argparse.Namespace()).memory_selection == Settings.from_env().memory_selection
    with pytest.raises(SystemExit):  # argparse: exit status 2 with the choices named
        build_parser().parse_args(["ask", "clip.mp4", "q?", "--memory-selection", "some"])


def test_tool_shapes_are_settings_that_reach_the_tools_and_a_runs_identity():
    from vidagent.config import ToolShapes
    from vidagent.tools.frames import FrameTools
    from vidagent.tools.temporal import TemporalTools

    narrow = replace(Settings(), tools=ToolShapes(caption_lines=3, frame_tool_fps=1.0))
    assert narrow.answer_settings()["tools"]["caption_lines"] == 3
    assert narrow.answer_settings() != Settings().answer_settings()  # a run made with other shapes is another run
    caption_retrieval = TemporalTools(None, None, None, None, narrow.tools).tools()[0]  # type: ignore[arg-type]
    assert "(3 at most)" in caption_retrieval.description
    frame_description = FrameTools(None, None, None, None, narrow.tools).tools()[0]  # type: ignore[arg-type]
    assert "1 frames a second, 8 at most" in frame_description.description


def test_the_text_screen_is_on_by_default_the_change_following_detector_off_and_both_can_be_set():
    settings = Settings.from_env({})
    assert settings.screen_text and not settings.detector_follows_change
    changed = Settings.from_env({"VIDAGENT_SCREEN_TEXT": "0", "VIDAGENT_FOLLOW_CHANGE": "1"})
    assert not changed.screen_text and changed.detector_follows_change
    # named in a run's identity only when on, so runs made before the settings existed keep their digest
    assert "screen_text" not in changed.answer_settings() and changed.answer_settings()["detector_follows_change"]
    assert settings.answer_settings()["screen_text"] and "detector_follows_change" not in settings.answer_settings()
