"""Settings: explicit overrides (what the command-line flags set) on top of the environment."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from vidagent.config import Settings
from vidagent.errors import VidagentError


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


# The variables Settings.from_env read before the settings were declared (issue 38): each still sets its setting.
EARLIER_VARIABLES = {
    "VIDAGENT_HOME": "home", "VIDAGENT_MODELS": "models", "VIDAGENT_LIBRARY": "library",
    "VIDAGENT_EXPERIENCE": "experience", "VIDAGENT_CHECK": "check", "VIDAGENT_MEMORY_SELECTION": "memory_selection",
    "VIDAGENT_PERCEPTION": "perception", "VIDAGENT_DETECTOR_WORKERS": "detector_workers",
    "VIDAGENT_REUSE_FRAMES": "reuse_near_duplicates", "VIDAGENT_SCREEN_TEXT": "screen_text",
    "VIDAGENT_FOLLOW_CHANGE": "detector_follows_change", "VIDAGENT_WEB_SEARCH": "web_search",
    "VIDAGENT_GLANCE_AFTER": "glance_after_s", "VIDAGENT_KNOWLEDGE_MAX_MIB": "knowledge_max_mib",
    "VIDAGENT_LLM_BASE_URL": "llm.base_url", "VIDAGENT_LLM_API_KEY": "llm.api_key", "OPENAI_API_KEY": "llm.api_key",
    "VIDAGENT_LLM_MODEL": "llm.model", "VIDAGENT_LLM_TIMEOUT": "llm.timeout_s", "VIDAGENT_LLM_THREADS": "llm.threads",
    "VIDAGENT_LLM_CACHE": "llm.cache", "VIDAGENT_CAPTIONER": "backends.captioner", "VIDAGENT_VQA": "backends.vqa",
    "VIDAGENT_DETECTOR": "backends.detector", "VIDAGENT_APPEARANCE": "backends.appearance",
    "VIDAGENT_GROUNDING": "backends.grounding", "VIDAGENT_VIDEO_CLASSIFIER": "backends.video_classifier",
    "VIDAGENT_SEGMENTER": "backends.segmenter", "VIDAGENT_CAPTIONER_API_KEY": "backend_api_keys",
    "VIDAGENT_VQA_API_KEY": "backend_api_keys", "VIDAGENT_VISION_CACHE": "vision_cache",
}


def test_every_setting_that_changes_answers_declares_its_environment_variable_and_the_earlier_ones_stay():
    import re

    declared = Settings.environment()
    assert {name: declared.get(name) for name in EARLIER_VARIABLES} == EARLIER_VARIABLES
    for setting in Settings().described():
        if setting.answers:
            assert setting.variables, f"{setting.name} changes answers but declares no environment variable"
    assert len(set(declared)) == len(declared)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    read_elsewhere = {"VIDAGENT_TOKEN", "VIDAGENT_TEST_DATA"}  # the server's token, the tests' data folder
    documented = set(re.findall(r"VIDAGENT_[A-Z0-9_]*[A-Z0-9]", readme)) - read_elsewhere
    assert documented <= set(declared), sorted(documented - set(declared))


def test_the_environment_is_read_as_before():
    env = {"VIDAGENT_HOME": "~/vid", "VIDAGENT_CHECK": "yes", "VIDAGENT_SCREEN_TEXT": "0", "VIDAGENT_REUSE_FRAMES": "1",
           "VIDAGENT_DETECTOR_WORKERS": "-2", "VIDAGENT_GLANCE_AFTER": "-5", "VIDAGENT_PERCEPTION": "pose, motion",
           "VIDAGENT_LLM_API_KEY": "", "OPENAI_API_KEY": "sk-open", "VIDAGENT_LLM_CACHE": "0", "VIDAGENT_VQA": "",
           "VIDAGENT_CAPTIONER_API_KEY": "cap-key"}
    settings = Settings.from_env(env)
    assert settings.home == Path("~/vid").expanduser() and not settings.check and not settings.screen_text
    assert settings.reuse_near_duplicates and settings.detector_workers == 0 and settings.glance_after_s == 0.0
    assert settings.perception == frozenset({"pose", "motion"}) and settings.backends.vqa is None
    assert (settings.llm.backend, settings.llm.api_key, settings.llm.cache) == ("local", None, False)  # no endpoint
    assert settings.backend_api_keys == (("captioner", "cap-key"),)
    remote = Settings.from_env({**env, "VIDAGENT_LLM_BASE_URL": "http://localhost:8000/v1"})
    assert (remote.llm.backend, remote.llm.api_key) == ("openai", "sk-open")  # the first key set
    assert Settings.from_env({"VIDAGENT_LLM_BACKEND": "OpenAI"}).llm.backend == "openai"  # as the README says
    assert Settings.from_env({"VIDAGENT_PERCEPTION": ""}).perception == frozenset()
    import pytest

    from vidagent.errors import VidagentError

    with pytest.raises(VidagentError, match="VIDAGENT_CHECK_SPANS: must be above 0"):
        Settings.from_env({"VIDAGENT_CHECK_SPANS": "0"})
    with pytest.raises(VidagentError, match="VIDAGENT_LLM_BACKEND: choose from local, openai"):
        Settings.from_env({"VIDAGENT_LLM_BACKEND": "vllm"})


def test_a_runs_identity_is_derived_from_the_declarations_and_keeps_the_digest_of_earlier_runs():
    from vidagent.config import ToolShapes
    from vidagent.eval.runner import settings_digest

    # the digests runs had before the settings were declared (computed with the code before issue 38)
    assert settings_digest(Settings()) == "e037c432b776dee28072c480749b773b308ec9839aac7dd89f90c02394d0af20"
    changed = Settings.from_env({"VIDAGENT_CHECK": "1", "VIDAGENT_SCREEN_TEXT": "0", "VIDAGENT_SEGMENTER": "hf",
                                 "VIDAGENT_PERCEPTION": "pose,motion"})
    assert settings_digest(changed) == "bdbca50775390f273b9ab6ff7db0acad89cb37b1e83c2a4aa03e4f4cf2c11116"
    # speed, files, keys and scopes are no part of it
    quiet = Settings.from_env({"VIDAGENT_LLM_TIMEOUT": "5", "VIDAGENT_LLM_THREADS": "2", "VIDAGENT_LLM_CACHE": "0",
                               "VIDAGENT_DETECTOR_WORKERS": "3", "VIDAGENT_VISION_CACHE": "0",
                               "VIDAGENT_LIBRARY": "/elsewhere.sqlite", "VIDAGENT_VQA_API_KEY": "k"})
    assert settings_digest(quiet) == settings_digest(Settings())
    # the settings moved from module constants (issue 38): named once changed, each its own run (the planners' own
    # steps are their options since issue 54: tests/agent/test_planner_settings.py)
    moved = {"check_spans": "VIDAGENT_CHECK_SPANS", "check_span_chars": "VIDAGENT_CHECK_SPAN_CHARS",
             "guard_material_chars": "VIDAGENT_GUARD_MATERIAL_CHARS", "absolute_parts": "VIDAGENT_ABSOLUTE_PARTS",
             "relative_parts": "VIDAGENT_RELATIVE_PARTS"}
    digests = {settings_digest(Settings())}
    for name, variable in moved.items():
        assert name not in Settings().answer_settings()["tools"]
        settings = Settings.from_env({variable: "7"})
        assert getattr(settings.tools, name) == 7 and settings.answer_settings()["tools"][name] == 7
        digests.add(settings_digest(settings))
    for name, variable in {"ocr_score": "VIDAGENT_OCR_SCORE", "text_match": "VIDAGENT_TEXT_MATCH"}.items():
        assert name not in Settings().answer_settings()["tools"]
        settings = Settings.from_env({variable: "0.25"})
        assert getattr(settings.tools, name) == 0.25 and settings.answer_settings()["tools"][name] == 0.25
        digests.add(settings_digest(settings))
        with pytest.raises(VidagentError, match="between 0 and 1"):
            Settings.from_env({variable: "2"})
    assert len(digests) == len(moved) + 1 + 2  # the two thresholds too
    assert ToolShapes().check_spans == 8


def test_a_resumed_run_made_with_other_planner_settings_is_refused_naming_them(tmp_path):
    import json

    import pytest

    from vidagent.eval.errors import EvalError
    from vidagent.eval.runner import IDENTITY_KEYS, _check_folder, settings_digest

    kept, now = Settings(), Settings.from_env({"VIDAGENT_CHECK_SPANS": "4"})
    identity = {key: None for key in IDENTITY_KEYS}
    (tmp_path / "run.json").write_text(json.dumps({**identity, "settings": settings_digest(kept),
                                                   "answer_settings": kept.answer_settings()}))
    _check_folder(tmp_path, {**identity, "settings": settings_digest(kept)}, kept.answer_settings())
    with pytest.raises(EvalError, match=r"other settings that change answers \(tools.check_spans "
                                        r"\(as before it existed\), not 4\)"):
        _check_folder(tmp_path, {**identity, "settings": settings_digest(now)}, now.answer_settings())
    wider = replace(kept, tools=replace(kept.tools, caption_lines=30))
    with pytest.raises(EvalError, match=r"tools.caption_lines 15, not 30"):
        _check_folder(tmp_path, {**identity, "settings": settings_digest(wider)}, wider.answer_settings())
