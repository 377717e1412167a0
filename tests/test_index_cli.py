"""``vidagent index`` over folders and many files: skips what is indexed, and local worker
processes or Ray build the same memory as one process."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import video_path
from test_cli import assert_one_line_error, run_cli
from vidagent.memory.store import Library
from vidagent.perception.node_assets import detector_assets_installed
from vidagent.video.video import Video

CLIPS = ("github_LLaMA-Factory/4.mp4", "github_mmaction2/test.avi")  # 5 s drawing; 6.6 s make-up with speech
TABLES = ("frames", "text_in_frame", "speech", "segments", "tracks", "object_segments")


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    clips = tmp_path / "clips" / "more"
    clips.mkdir(parents=True)
    for relative in CLIPS:
        (clips / Path(relative).name).symlink_to(video_path(relative))
    (clips / "notes.mp4").write_text("not a video\n")  # found in a folder: reported, left out
    (clips / "readme.txt").write_text("not a video either, and not named like one\n")
    return tmp_path / "clips"


def _rows(home: Path) -> dict[str, list]:
    with Library(home / "library.sqlite") as library:
        ids = [Video(video_path(relative)).content_hash for relative in CLIPS]
        return {table: [library.rows(f"SELECT * FROM {table} WHERE video_id=? ORDER BY 2, 3", (i,)) for i in ids]
                for table in TABLES}


def test_missing_path_is_one_line_error(tmp_path):
    assert_one_line_error(run_cli("index", str(video_path(CLIPS[0])), str(tmp_path / "gone"), home=tmp_path),
                          2, "gone: no such file or folder")


@pytest.mark.models
@pytest.mark.slow
def test_folder_is_indexed_once_then_skipped_and_workers_build_the_same_memory(tmp_path, folder, models_dir):
    if not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed")
    serial = run_cli("index", "-q", str(folder), home=tmp_path / "serial", models_dir=models_dir)
    assert serial.returncode == 1, serial.stderr  # the fake video failed, the others were built
    assert "notes.mp4" in serial.stderr and serial.stderr.count("vidagent: error:") == 1
    assert serial.stdout.count("built in") == 2 and "indexed 2 videos" in serial.stdout
    again = run_cli("index", "-q", str(folder), str(video_path(CLIPS[0])), home=tmp_path / "serial",
                    models_dir=models_dir)
    assert again.stdout.count("already indexed") == 2 and "same content as" in again.stdout
    assert "built in" not in again.stdout
    reference = _rows(tmp_path / "serial")
    assert all(reference["segments"]) and any(reference["speech"])

    for flags, home in ((["--workers", "2"], "processes"), (["--ray", "--workers", "2"], "ray")):
        if home == "ray":
            pytest.importorskip("ray")
        result = run_cli("index", "-q", *flags, str(folder), home=tmp_path / home, models_dir=models_dir)
        assert result.stdout.count("built in") == 2, result.stderr
        rows = _rows(tmp_path / home)
        if home == "processes":
            assert rows == reference
            continue
        # A Ray actor holds one CPU (Ray sets OMP_NUM_THREADS=1): Whisper's one-thread decoding may
        # split and punctuate the same words differently, and the segments embed that speech.
        for table in ("frames", "text_in_frame", "tracks", "object_segments"):
            assert rows[table] == reference[table], table
        assert _words(rows["speech"]) == _words(reference["speech"])
        assert [r[:5] for rs in rows["segments"] for r in rs] == [r[:5] for rs in reference["segments"] for r in rs]


def _words(speech: list[list[tuple]]) -> list[str]:
    text = " ".join(row[3] for rows in speech for row in rows).lower()
    return "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in text).split()
