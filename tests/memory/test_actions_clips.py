"""Actions on a real clip with the real offline detector and pose model (issue 25, item 2): sam2's 01_dog,
a woman on the left who bends over to a dog that runs and leaps (checked by eye on the frames)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import video_path
from vidagent.config import BackendSettings, Settings
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.store import Library
from vidagent.perception.node_assets import detector_assets_installed
from vidagent.perception.suite import Perception
from vidagent.video.video import Video

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def dog_actions(tmp_path_factory, models_dir):
    if not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed (run `vidagent models install`)")
    home = tmp_path_factory.mktemp("actions-clip")
    settings = replace(Settings.from_env(), home=home, models=models_dir, perception=frozenset({"pose"}),
                       backends=BackendSettings(segmenter="none"), detector_workers=1)
    perception = Perception.from_settings(settings)
    video = Video(video_path("github_sam2/01_dog.mp4"))
    try:
        with Library(settings.library_path) as library:
            MemoryBuilder(library, perception, settings).build(video, ["objects"], progress=False)
            rows = library.rows("""SELECT o.category, a.verb, a.start_s, a.end_s, a.source FROM actions a
                                   JOIN objects o USING (video_id, object_id) WHERE a.video_id=? ORDER BY a.action_id""",
                                (video.content_hash,))
            lines = dict(library.rows("""SELECT o.category, d.line FROM object_descriptions d
                                         JOIN objects o USING (video_id, object_id) WHERE d.video_id=?""",
                                      (video.content_hash,)))
    finally:
        perception.close()
    return rows, lines


def test_the_woman_bends_over_and_does_not_walk(dog_actions):
    rows, _ = dog_actions
    woman = [(verb, source) for category, verb, _, _, source in rows if category == "person"]
    assert ("bends over", "pose") in woman and ("stands", "pose") in woman
    assert not any(verb in ("walks", "runs") for verb, _ in woman)  # she bends and straightens where she stands


def test_the_dog_moves_and_the_lines_say_so(dog_actions):
    rows, lines = dog_actions
    assert any(category == "dog" and verb == "moves" and source == "trajectory" for category, verb, _, _, source in rows)
    assert lines["dog"].startswith("white and brown dog") and "moves" in lines["dog"]
    assert "bends over" in lines["person"]
