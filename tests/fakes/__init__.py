"""Test doubles that buy speed, never coverage: a scripted chat model, a scripted perception that
sees what a clip's script says, and a library filled from rows through the real memory builder.

Every model-backed path these stand in for still has a test that runs the real model (marked
``models``); these let the logic around the models (tools, planners, session, server, eval) run in
milliseconds.
"""

from fakes.home import ScriptedHome, clip_file, scripted_home
from fakes.library import RowsVideo, build_home, fake_settings, library_from_rows
from fakes.llm import ScriptedLLM, prefers
from fakes.perception import (FakeClip, HashingEmbedder, Scene, SceneObject, scripted_perception,
                              write_clip)

__all__ = ["FakeClip", "HashingEmbedder", "RowsVideo", "Scene", "SceneObject", "ScriptedHome", "ScriptedLLM",
           "build_home", "clip_file", "fake_settings", "library_from_rows", "prefers", "scripted_home", "scripted_perception", "write_clip"]
