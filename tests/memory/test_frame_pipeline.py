"""The frame pipeline's rate follows change: a stage whose reuse has a sparse rate runs its models once
a second where the picture only drifts and on every sampled frame where something moves. A scripted
stage records the frames it was given; the clip is drawn here. Fast tier: no model."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from conftest import write_test_video
from vidagent.memory.frame_pipeline import FramePipeline
from vidagent.memory.store import Library
from vidagent.video.change import ChangeLimits, SparseRate
from vidagent.video.video import SampledFrame, Video

FPS, SAMPLE_FPS = 10, 2


def _clip(path: Path) -> Path:
    """3 s of a still picture fading slowly (4 grey levels per half second), then 2 s of a square
    crossing it."""
    frames = []
    for i in range(5 * FPS):
        t = i / FPS
        level = 100 + 8 * min(t, 3.0)
        image = np.clip(level + np.linspace(-30, 30, 160)[None, :, None] + np.zeros((120, 160, 3)), 0, 255)
        image = image.astype(np.uint8)
        if t >= 3.0:
            x = int(10 + (t - 3.0) * 60)
            image[40:70, x:x + 30] = (20, 20, 200)
        frames.append(image)
    return write_test_video(path, frames, fps=FPS)


class _Stage:
    """A frame stage that remembers the frames its 'model' ran on."""

    name = "scripted"
    requires: tuple[str, ...] = ()
    max_side = 160
    batch_size = 2

    def __init__(self, reuse: ChangeLimits | None) -> None:
        self.reuse = reuse
        self.ran: list[float] = []

    def config(self) -> dict[str, Any]:
        return {"reuse": self.reuse.config() if self.reuse else None}

    def frame_times(self, video: Video) -> list[float]:
        return [round(i / SAMPLE_FPS, 3) for i in range(int(video.duration_s * SAMPLE_FPS))]

    def process(self, frames: Sequence[SampledFrame]) -> list[Any]:
        self.ran.extend(frame.time_s for frame in frames)
        return [frame.time_s for frame in frames]

    def finish(self, video: Video, library: Library, results: Mapping[float, Any]) -> dict:
        return {}


def _run(tmp_path: Path, reuse: ChangeLimits | None) -> tuple[_Stage, dict[float, Any]]:
    video = Video(_clip(tmp_path / "fade.mp4"))
    stage = _Stage(reuse)
    with Library(tmp_path / f"library-{len(list(tmp_path.iterdir()))}.sqlite") as library:
        library.add_video(video.info)
        outcome = FramePipeline(library, video, progress=False).run([stage])["scripted"]  # type: ignore[list-item]
    return stage, outcome.results


def test_the_detector_runs_once_a_second_where_the_picture_is_still_and_at_full_rate_where_it_moves(tmp_path):
    every, _ = _run(tmp_path, None)
    assert every.ran == [i / 2 for i in range(10)]
    near_duplicates, _ = _run(tmp_path, ChangeLimits())
    assert near_duplicates.ran == every.ran  # the fade is more than a near-duplicate
    following, results = _run(tmp_path, ChangeLimits(sparse=SparseRate()))
    assert following.ran == [0.0, 1.0, 2.0, 3.0, 3.5, 4.0, 4.5]  # still: once a second; moving: each frame
    assert [results[t] for t in (0.5, 1.5, 2.5)] == [0.0, 1.0, 2.0]  # the frames between reuse the last result


def test_the_change_following_setting_reaches_the_objects_stage_config(tmp_path):
    from dataclasses import replace

    from fakes.perception import scripted_perception
    from vidagent.config import Settings
    from vidagent.memory.builder import MemoryBuilder

    def objects_config(**changes: bool) -> dict:
        settings = replace(Settings(home=tmp_path), **changes)
        with Library(tmp_path / "configs.sqlite") as library:
            return MemoryBuilder(library, scripted_perception(), settings).stage("objects").config()

    assert "sparse" not in objects_config()["reuse_near_duplicates"]  # off by default: the config is as it was
    assert "sparse" in objects_config(detector_follows_change=True)["reuse_near_duplicates"]
    assert "reuse_near_duplicates" not in objects_config(reuse_near_duplicates=False, detector_follows_change=True)


def test_a_checkpointed_result_at_a_time_the_stage_no_longer_samples_is_not_used(tmp_path):
    video = Video(_clip(tmp_path / "fade.mp4"))
    stage = _Stage(None)
    with Library(tmp_path / "library.sqlite") as library:
        library.add_video(video.info)
        # a build on another sampling grid stopped after these (0.25 s is not on the stage's grid now)
        library.save_checkpoint(video.content_hash, stage.name, stage.config(), 0.0, [[0.0, "kept"], [0.25, "old"]])
        outcome = FramePipeline(library, video, progress=False).run([stage])["scripted"]  # type: ignore[list-item]
    assert 0.25 not in outcome.results and outcome.results[0.0] == "kept"
    assert stage.ran == [i / 2 for i in range(1, 10)]  # the checkpointed frame on the grid is not run again


def test_a_checkpoint_keeps_null_for_an_unsaved_value_and_refuses_what_json_cannot_hold(tmp_path):
    import pytest

    from vidagent.memory.store import Unsaved

    video = Video(write_test_video(tmp_path / "v.mp4", [np.zeros((16, 16, 3), np.uint8)] * 4, fps=4))
    with Library(tmp_path / "library.sqlite") as library:
        library.add_video(video.info)
        chunk = [[0.0, {"boxes": [[1, 2, 3, 4]], "waiting": Unsaved(object())}]]
        library.save_checkpoint(video.content_hash, "objects", {"k": 1}, 0.0, chunk)
        saved = [[[0.0, {"boxes": [[1, 2, 3, 4]], "waiting": None}]]]
        assert library.checkpoints(video.content_hash, "objects", {"k": 1}) == saved
        with pytest.raises(TypeError):
            library.save_checkpoint(video.content_hash, "objects", {"k": 1}, 1.0, [[1.0, {"cut": object()}]])
