"""Hostile and unusual media (tests/media_corpus.py), each indexed with the real offline models:
every file either gets a whole memory, or one clear line and nothing half-written."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from vidagent.config import Settings
from vidagent.errors import VideoError
from vidagent.memory.store import ALL_TABLES, Library
from vidagent.session import Session
from vidagent.video.video import Video, file_content_hash

from media_corpus import MediaCase, build_corpus, long_video

CASE_NAMES = [
    "plain", "truncated_at_10pc", "truncated_at_50pc", "truncated_at_90pc", "faststart_truncated_at_60pc",
    "corrupt_packets_mp4", "corrupt_packets_mkv", "wrong_extension", "no_extension", "no_video_stream",
    "zero_frames", "variable_frame_rate", "rotated", "4k", "still_png_renamed_mp4", "still_jpeg_renamed_mp4",
    "mkv_three_audio_tracks",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, MediaCase]:
    cases = {case.name: case for case in build_corpus(tmp_path_factory.mktemp("corpus"))}
    assert list(cases) == CASE_NAMES
    return cases


@pytest.fixture(scope="module")
def session(tmp_path_factory, models_dir: Path):
    from vidagent.perception.node_assets import detector_assets_installed

    if not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed (run `vidagent models install`)")
    settings = replace(Settings.from_env(), home=tmp_path_factory.mktemp("corpus-home"), models=models_dir)
    with Session(settings) as opened:
        yield opened


@pytest.mark.models
@pytest.mark.parametrize("name", CASE_NAMES)
def test_each_file_indexes_whole_or_fails_in_one_clear_line(corpus, session, name):
    case = corpus[name]
    if case.error:
        with pytest.raises(VideoError) as error:
            session.index(case.path)
        message = str(error.value)
        assert message.startswith(f"{case.path}: ") and case.error in message and "\n" not in message
        with Library(session.settings.library_path) as library:
            video_id = file_content_hash(case.path)
            for table in ALL_TABLES + ("stages",):
                assert library.count_rows(table, video_id) == 0, table  # nothing half-written
        return
    memory = session.index(case.path)
    info = memory.video.info
    assert (info.width, info.height) == case.size and info.has_audio == case.audio
    assert {"frames", "speech", "segments"} <= set(memory.stages)
    segments = memory.segments
    assert len(segments) == len(memory.video.segments()) and segments
    assert segments[0].start_s == 0 and segments[-1].end_s == pytest.approx(info.duration_s)
    assert all(s.description for s in segments)  # every segment was described


def test_a_variable_frame_rate_file_keeps_its_own_frame_times(corpus):
    video = Video(corpus["variable_frame_rate"].path)
    assert video.duration_s == pytest.approx(4.1, abs=0.05)
    # the frame on screen at 3.0 s is the one shown from 2.05 s (the next comes at 3.9 s)
    on_screen = next(iter(video.frames_at([3.0])))
    frame_205 = next(iter(video.frames_at([2.06])))
    assert (on_screen.image == frame_205.image).all()


def test_a_4k_file_is_scaled_down_for_the_models(corpus):
    frame = next(iter(Video(corpus["4k"].path).frames_at([0.5], max_side=768)))
    assert frame.image.shape == (432, 768, 3)


def test_a_very_long_video_opens_at_once_and_its_end_can_be_read(tmp_path):
    video = Video(long_video(tmp_path / "two_hours.mp4", hours=2))
    assert video.duration_s == pytest.approx(7200, abs=11)
    assert len(video.segments()) == pytest.approx(3600, abs=6)
    last = list(video.frames_at([7185.0, 7190.0]))
    assert [round(f.time_s) for f in last] == [7185, 7190] and last[0].image.shape == (48, 64, 3)


def test_the_index_command_reports_a_bad_file_in_one_line(corpus, models_dir, tmp_path):
    env = {**os.environ, "VIDAGENT_HOME": str(tmp_path / "home"), "VIDAGENT_MODELS": str(models_dir)}
    for name in ("truncated_at_50pc", "still_png_renamed_mp4"):
        path = corpus[name].path
        result = subprocess.run([sys.executable, "-m", "vidagent.cli", "index", "-q", str(path)], env=env,
                                capture_output=True, text=True, timeout=120)
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert str(path) in lines[0] and corpus[name].error in lines[0]
