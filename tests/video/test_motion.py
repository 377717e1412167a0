"""Motion from the frames themselves: camera motion, scene cuts and movement (vidagent.video.motion),
and the ``motion`` stage that adds them to the segment descriptions when switched on."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from vidagent.config import Settings
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.store import Library, config_key
from vidagent.perception.suite import Perception
from vidagent.video.motion import analyse, compare, decode_thumbnail, describe, encode_thumbnail
from vidagent.video.video import Video

from conftest import video_path

STEP_S = 0.25


def _texture(seed: int, size: tuple[int, int] = (200, 260)) -> np.ndarray:
    """A smooth random grey texture with corners everywhere (a stand-in for a real scene)."""
    noise = np.random.default_rng(seed).uniform(0, 255, size).astype(np.float32)
    smooth = cv2.GaussianBlur(noise, (0, 0), 2.0)
    return cv2.normalize(smooth, None, 0, 255, cv2.NORM_MINMAX)


def _view(scene: np.ndarray, x: int, y: int = 20, shape: tuple[int, int] = (96, 128), noise_seed: int = 0) -> np.ndarray:
    """The window of ``scene`` at (x, y), with a little sensor noise."""
    height, width = shape
    window = scene[y:y + height, x:x + width]
    noise = np.random.default_rng(noise_seed).normal(0, 1.5, window.shape)
    return np.clip(window + noise, 0, 255).astype(np.uint8)


def _run(views: list[np.ndarray]) -> list:
    return analyse([(round(i * STEP_S, 3), view) for i, view in enumerate(views)])


def test_content_moving_left_is_a_camera_panning_right():
    scene = _texture(1)
    views = [_view(scene, 10 + 8 * i, noise_seed=i) for i in range(8)]  # the window slides right
    pair = compare(views[0], views[1], STEP_S)
    assert pair.tracked and pair.shift_x == pytest.approx(-8 / 128 / STEP_S, rel=0.1)
    assert abs(pair.shift_y) < 0.01 and not pair.abrupt
    summary = describe(_run(views))
    assert summary.camera == "camera pans right" and not summary.cut_times and summary.moving == ""


def test_content_moving_right_and_down_is_a_camera_panning_left_and_tilting_up():
    scene = _texture(2)
    views = [_view(scene, 100 - 8 * i, 40 - 4 * i, noise_seed=i) for i in range(8)]
    assert describe(_run(views)).camera == "camera pans left, tilts up"


def test_zooming_in_is_named():
    scene = _texture(3, (96, 128))
    views = []
    for i in range(8):
        scale = 1.06 ** i  # 6% per step of 0.25 s
        matrix = cv2.getRotationMatrix2D((63.5, 47.5), 0, scale)
        views.append(cv2.warpAffine(scene, matrix, (128, 96), borderMode=cv2.BORDER_REFLECT).astype(np.uint8))
    pair = compare(views[0], views[1], STEP_S)
    assert pair.zoom == pytest.approx(np.log(1.06) / STEP_S, rel=0.15)
    assert "zooms in" in describe(_run(views)).camera


def test_a_still_shot_is_a_still_camera_with_no_cut():
    scene = _texture(4)
    views = [_view(scene, 50, noise_seed=i) for i in range(8)]
    summary = describe(_run(views))
    assert summary.camera == "camera still" and summary.cut_times == () and summary.moving == ""
    assert summary.phrase == "camera still"


def test_a_cut_between_two_shots_is_found_once_and_placed_between_them():
    first, second = _texture(5), _texture(6)
    views = [_view(first, 50, noise_seed=i) for i in range(4)] + [_view(second, 50, noise_seed=i) for i in range(4, 8)]
    intervals = _run(views)
    assert [interval.cut for interval in intervals] == [False, False, False, True, False, False, False]
    summary = describe(intervals)
    assert summary.cut_times == (0.9,) and "scene cut at 0.9 s" in summary.phrase
    assert summary.camera == "camera still"  # the cut itself is no camera motion


def test_something_moving_before_a_still_camera_is_movement_where_it_is():
    scene = _texture(7)
    views = []
    for i in range(8):
        view = _view(scene, 50, noise_seed=i)
        x = 40 + 6 * i  # a bright block crossing the middle of the picture
        view[36:60, x:x + 20] = 255
        views.append(view)
    summary = describe(_run(views))
    assert summary.camera == "camera still"
    assert summary.moving in ("some movement in the centre", "much movement in the centre")


def test_thumbnails_survive_their_json_round_trip():
    view = _view(_texture(8), 30)
    text = json.loads(json.dumps(encode_thumbnail(view)))
    assert np.array_equal(decode_thumbnail(text), view)


# -- the stage, end to end on real clips ------------------------------------------------------
def _builder(home: Path, models_dir: Path, perception: Perception, motion: bool) -> tuple[MemoryBuilder, Library]:
    settings = replace(Settings.from_env(), home=home, models=models_dir,
                       perception=frozenset({"motion"}) if motion else frozenset())
    library = Library(settings.library_path)
    return MemoryBuilder(library, perception, settings), library


def _motion_rows(library: Library, video: Video) -> list[tuple]:
    return library.rows("SELECT segment_id, camera, cut_times, moving, phrase FROM motion WHERE video_id=? "
                        "ORDER BY segment_id", (video.content_hash,))


def test_motion_on_adds_it_to_segments_and_off_changes_nothing(tmp_path, models_dir, perception):
    # 2.avi (checked by eye): a tripod shot of a woman cooking, cut at 1.25-1.75 s to a close-up of
    # the wok being stirred, on a tripod too.
    video = Video(video_path("github_LLaMA-Factory/2.avi"))
    off, off_library = _builder(tmp_path, models_dir, perception, motion=False)
    off.build(video, progress=False)
    off_config = off.stage("segments").config()
    assert "motion" not in off_config and "motion" not in off_library.stage_names(video.content_hash)
    assert not any("Motion:" in s.description for s in off_library.segments(video.content_hash))

    on, library = _builder(tmp_path, models_dir, perception, motion=True)
    assert on.missing_stages(video) == ["motion", "segments"]  # frames and speech stay as they are
    memory = on.build(video, progress=False)
    assert on.stage("segments").config() == {**off_config, "motion": config_key(on.stage("motion").config())}
    rows = _motion_rows(library, video)
    assert len(rows) == len(video.segments()) == 5
    cuts = [t for row in rows for t in json.loads(row[2])]
    assert len(cuts) == 1 and 1.25 <= cuts[0] <= 1.75 and json.loads(rows[0][2]) == cuts
    assert all(row[1] == "camera still" for row in rows)
    assert all("in the centre" in row[3] for row in rows[1:4])  # the stirring spatula
    first = memory.segments[0].description
    assert f"Motion: camera still; scene cut at {cuts[0]:.1f} s;" in first
    off_library.close()
    library.close()


def _motion_stage_rows(clip: str, home: Path, models_dir: Path, perception: Perception) -> list[tuple]:
    """The motion rows of a test clip after building its motion stage alone."""
    video = Video(video_path(clip))
    builder, library = _builder(home, models_dir, perception, motion=True)
    try:
        builder.build(video, ["motion"], progress=False)
        return _motion_rows(library, video)
    finally:
        library.close()


def test_a_handheld_phone_is_shaky(tmp_path, models_dir, perception):
    # making_cake.mp4 (by eye): a phone held by hand, turned from a face to a mixer and back.
    rows = _motion_stage_rows("github_Ask-Anything/making_cake.mp4", tmp_path, models_dir, perception)
    assert sum("shaky" in row[1] for row in rows) >= 3 and not any(json.loads(row[2]) for row in rows)


def test_a_pan_after_a_dog_and_its_cut(tmp_path, models_dir, perception):
    # example1.mp4 (by eye, 5 fps): the camera follows a dog in the snow; cut at 4.8-5.0 s to another view.
    rows = _motion_stage_rows("github_InternVideo/example1.mp4", tmp_path, models_dir, perception)
    assert rows[0][1] == "camera still"
    cuts = [t for row in rows for t in json.loads(row[2])]
    assert len(cuts) == 1 and 4.7 <= cuts[0] <= 5.3
    assert rows[1][1] not in ("", "camera still")  # following the dog from about 2.9 s
