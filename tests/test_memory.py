"""Temporal memory: built once per video content, reused, and never half-written."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from vidagent.config import Settings
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.store import Library
from vidagent.perception.node_assets import detector_assets_installed
from vidagent.perception.suite import Perception
from vidagent.video.video import Video

from conftest import video_path


def _builder(tmp_path: Path, models_dir: Path, perception: Perception) -> tuple[MemoryBuilder, Library]:
    settings = replace(Settings.from_env(), home=tmp_path, models=models_dir)
    library = Library(settings.library_path)
    return MemoryBuilder(library, perception, settings), library


def test_build_stores_every_segment_with_description_and_embedding(tmp_path, models_dir, perception):
    builder, library = _builder(tmp_path, models_dir, perception)
    video = Video(video_path("github_Video-LLaMA/skateboarding_dog.mp4"))
    memory = builder.build(video, progress=False)
    assert memory.segment_count == 7
    for segment in memory.segments:
        assert segment.description.startswith("[detector")
        assert segment.embedding.shape == (384,) and abs(float(np.linalg.norm(segment.embedding)) - 1) < 1e-3
    # A dog is on screen for most of the clip (checked by eye on the frames).
    assert sum("dog" in s.description for s in memory.segments) >= 4
    assert library.count_rows("stages", video.content_hash) == 3
    library.close()


def test_second_build_reuses_every_stage(tmp_path, models_dir, perception):
    builder, library = _builder(tmp_path, models_dir, perception)
    video = Video(video_path("github_LLaMA-Factory/4.mp4"))
    builder.build(video, progress=False)
    stamps = library._conn.execute("SELECT stage, built_at, seconds FROM stages ORDER BY stage").fetchall()
    started = time.perf_counter()
    again = builder.build(video, progress=False)
    assert time.perf_counter() - started < stamps[0][2] + stamps[1][2] + stamps[2][2]
    assert library._conn.execute("SELECT stage, built_at, seconds FROM stages ORDER BY stage").fetchall() == stamps
    assert again.segment_count == 3
    library.close()


def test_speech_is_stored_with_times(tmp_path, models_dir, perception):
    builder, library = _builder(tmp_path, models_dir, perception)
    video = Video(video_path("github_mmaction2/test.avi"))  # make-up tutorial: "I started the outer corner..."
    memory = builder.build(video, progress=False)
    speech = library.speech(video.content_hash)
    assert "outer corner" in " ".join(text for _, _, text in speech).lower()
    assert all(0 <= start < end <= video.duration_s + 0.5 for start, end, _ in speech)
    assert any("corner" in segment.speech.lower() for segment in memory.segments)
    library.close()


def test_a_killed_index_resumes_from_its_checkpoints_and_equals_an_uninterrupted_build(tmp_path, models_dir):
    if not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed")
    source = video_path("github_Video-LLaVA/sample_demo_22.mp4")  # 36 s, 18 segments: long enough to kill mid-way
    env = {**os.environ, "VIDAGENT_HOME": str(tmp_path / "home"), "VIDAGENT_MODELS": str(models_dir)}
    index = [sys.executable, "-m", "vidagent.cli", "index", "--stage", "segments", str(source)]
    process = subprocess.Popen(index, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen = ""
    while not re.search(r"\b(9|1[0-7])/18\b", seen):  # past two checkpoints of 4 frames
        chunk = process.stderr.read(32)
        assert chunk, f"the index run ended before it could be killed mid-way: {seen[-500:]}"
        seen += chunk
    process.send_signal(signal.SIGKILL)
    process.wait()
    video_id = Video(source).content_hash
    with Library(tmp_path / "home" / "library.sqlite") as library:
        for table in ("frames", "text_in_frame", "segments", "stages"):
            assert library.count_rows(table, video_id) == 0, table  # nothing half-written
        assert library.count_rows("stage_checkpoints", video_id) >= 2

    resumed = subprocess.run(index, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    first_progress = re.search(r"\b(\d+)/18\b", resumed.stderr)
    assert first_progress and int(first_progress.group(1)) >= 8  # it started from the checkpoints
    reference_env = {**env, "VIDAGENT_HOME": str(tmp_path / "reference")}
    subprocess.run([*index[:-1], "-q", str(source)], env=reference_env, check=True, capture_output=True, timeout=600)
    with Library(tmp_path / "home" / "library.sqlite") as again, \
            Library(tmp_path / "reference" / "library.sqlite") as reference:
        for table in ("frames", "text_in_frame", "speech", "segments", "clips"):
            query = f"SELECT * FROM {table} WHERE video_id=? ORDER BY 2, 3"
            assert again.rows(query, (video_id,)) == reference.rows(query, (video_id,)), table
        assert again.count_rows("stage_checkpoints", video_id) == 0
