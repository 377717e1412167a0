"""Temporal memory: built once per video content, reused, and never half-written."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vidagent.config import Settings
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.stages.segments import SegmentsStage
from vidagent.memory.store import (SCHEMA_VERSION, DescriberRecord, FrameRecord, Library, SegmentRecord,
                                   frames_stage_rows, segments_stage_rows)
from vidagent.perception.base import FrameDescription, Label, SeenObject, TextBox
from vidagent.perception.frame_words import describer_sentence
from vidagent.tools.observed import segment_text
from vidagent.perception.node_assets import detector_assets_installed
from vidagent.perception.suite import Perception
from vidagent.video.video import Video, VideoInfo

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
        assert not segment.description.startswith("[")  # the describer's label is said once, by the note
        assert segment.embedding.shape == (384,) and abs(float(np.linalg.norm(segment.embedding)) - 1) < 1e-3
    # A dog is on screen for most of the clip (checked by eye on the frames): in the facts and in the words.
    assert sum("dog" in s.description for s in memory.segments) >= 4
    assert sum(any(o.label == "dog" for o in f.seen.objects) for f in memory.frames) >= 4
    assert all(f.seen.size[0] > 0 and f.seen.caption is None for f in memory.frames)
    assert memory.note == perception.describer.memory_note and "not a caption" in library.describer(video.content_hash).label
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


@pytest.mark.models
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


# -- facts kept as data (no models) ------------------------------------------------------------------------

LABEL = "[detector+OCR description, not a caption]"
DOG = FrameDescription(objects=(SeenObject("dog", 0.9, (400.0, 100.0, 500.0, 300.0), "white and brown", "Border collie"),
                                SeenObject("person", 0.7, (0.0, 0.0, 100.0, 390.0), "", "", "standing")),
                       labels=(Label("drum", 0.61),), on_screen_text=("GATE 7", "EXIT"),
                       text_boxes=(TextBox("GATE 7", (10.0, 10.0, 60.0, 30.0), 0.9), TextBox("EXIT", (10.0, 50.0, 60.0, 70.0), 0.8)),
                       size=(600, 400))
EMPTY = FrameDescription(size=(600, 400))


def _video(video_id: str = "0" * 32) -> SimpleNamespace:
    info = VideoInfo(path="toy.mp4", content_hash=video_id, duration_s=4.0, fps=25.0, width=600, height=400,
                     rotation=0, has_audio=False, codec="h264", container="mp4")
    segments = [SimpleNamespace(segment_id=i, start_s=2.0 * i, end_s=2.0 * i + 2) for i in range(2)]
    return SimpleNamespace(content_hash=video_id, info=info, segments=lambda seconds: segments)


class _Embedder:
    name, dim = "toy", 4

    def __init__(self) -> None:
        self.documents: list[str] = []

    def embed_passages(self, texts):
        self.documents.extend(texts)
        return np.tile(np.eye(4, dtype=np.float32)[0], (len(texts), 1))


def test_frames_keep_their_facts_and_the_describer_once(tmp_path):
    video = _video()
    frames = [FrameRecord(1.0, 0, DOG), FrameRecord(3.0, 1, EMPTY)]
    with Library(tmp_path / "library.sqlite") as library:
        library.add_video(video.info)
        library.write_stage(video.content_hash, "frames", {"toy": 1},
                            frames_stage_rows(frames, DescriberRecord("toy-describer", LABEL, "toy note")), 0.1)
        assert library.frames(video.content_hash) == frames  # every fact back as it went in
        assert library.describer(video.content_hash) == DescriberRecord("toy-describer", LABEL, "toy note")
        # the words SQL readers find beside the facts: no label, no on-screen text (it has its own table)
        words = [row[0] for row in library.rows("SELECT description FROM frames ORDER BY time_s")]
        assert words == ["1 person (standing, large, middle left); 1 dog (Border collie?, white and brown, medium, "
                         "middle right). ImageNet guesses for the frame: drum 61%.", "no COCO objects detected."]


def test_segments_read_their_frames_words_and_embed_the_describers_sentences(tmp_path):
    video = _video()
    embedder = _Embedder()
    with Library(tmp_path / "library.sqlite") as library:
        library.add_video(video.info)
        library.write_stage(video.content_hash, "frames", {"toy": 1}, frames_stage_rows(
            [FrameRecord(1.0, 0, DOG), FrameRecord(3.0, 1, EMPTY)], DescriberRecord("toy", LABEL, "note")), 0.1)
        library.write_stage(video.content_hash, "speech", {}, {"speech": [(0.5, 1.5, "boarding now")]}, 0.1)
        library.write_stage(video.content_hash, "motion", {}, {"motion": [
            (0, 0.0, 2.0, "camera still", "[]", "", "camera still"), (1, 2.0, 4.0, "camera pans left", "[]", "", "camera pans left")]}, 0.1)
        stage = SegmentsStage(embedder, 2.0, {"toy": 1}, {}, motion_config={})
        library.write_stage(video.content_hash, "segments", stage.config(), stage.build(video, library, False), 0.1)
        first, second = library.segments(video.content_hash)
    assert first.description == ("1 person (standing, large, middle left); 1 dog (Border collie?, white and brown, medium, "
                                 "middle right). ImageNet guesses for the frame: drum 61%. Motion: camera still.")
    assert second.description == "no COCO objects detected. Motion: camera pans left."
    # the one rendering planners, evidence and the page read: what was seen, then speech and text, quoted
    assert segment_text(first) == (f"{first.description} Speech: <video_text>boarding now</video_text> "
                                   "On-screen text: <video_text>GATE 7 | EXIT</video_text>")
    # embedded as before schema 4 (the describer's whole sentences), so retrieval ranks segments as it did
    assert embedder.documents[0] == (f"{describer_sentence(DOG, LABEL)} Motion: camera still. boarding now GATE 7 | EXIT")
    assert describer_sentence(DOG, LABEL).startswith(LABEL) and describer_sentence(DOG, LABEL).endswith(
        'drum 61%. On-screen text: "GATE 7", "EXIT".')


def test_a_caption_memory_reads_its_captions(tmp_path):
    caption = SegmentRecord(0, 0.0, 1.0, "a man <opens> the door", "", "", np.zeros(4, np.float32))
    with Library(tmp_path / "library.sqlite") as library:
        library.add_video(_video().info)
        library.write_stage("0" * 32, "segments", {"import": 1}, segments_stage_rows([caption]), 0.1)
        (stored,) = library.segments("0" * 32)
    assert segment_text(stored) == "a man ‹opens› the door"


def test_a_schema_3_library_drops_its_sentences_and_rebuilds_its_frames(tmp_path):
    path = tmp_path / "library.sqlite"
    video = _video()
    with Library(path) as library:
        library.add_video(video.info)
        library.write_stage(video.content_hash, "speech", {}, {"speech": [(0.5, 1.5, "hi")]}, 0.1)
    connection = sqlite3.connect(path)
    connection.executescript(f"""
        DROP TABLE frames; DROP TABLE describers;
        CREATE TABLE frames (video_id TEXT NOT NULL, time_s REAL NOT NULL, segment_id INTEGER NOT NULL,
                             description TEXT NOT NULL, objects TEXT NOT NULL, PRIMARY KEY (video_id, time_s));
        INSERT INTO frames VALUES ('{video.content_hash}', 1.0, 0, '{LABEL} 1 dog (white, medium, centre).', '["dog"]');
        INSERT INTO text_in_frame VALUES ('{video.content_hash}', 1.0, 0, 'EXIT', 0, 0, 1, 1, 0.9);
        INSERT INTO stages VALUES ('{video.content_hash}', 'frames', 'k', '{{}}', 'then', 1.0);
        UPDATE meta SET value = '3' WHERE key = 'schema_version';""")
    connection.close()
    with Library(path) as library:
        assert library.rows("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert library.stage_names(video.content_hash) == ["speech"]  # frames rebuild when next needed
        assert library.frames(video.content_hash) == [] and library.text_in_frames(video.content_hash) == []
        library.write_stage(video.content_hash, "frames", {"toy": 1},
                            frames_stage_rows([FrameRecord(1.0, 0, DOG)], DescriberRecord("toy", LABEL, "n")), 0.1)
        assert library.frames(video.content_hash)[0].seen == DOG
