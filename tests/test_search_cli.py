"""``vidagent search`` and ``vidagent ask --library`` end to end with the real models (E5 for the index and the
query, the embedded chat model for the judgement) over a library of the two temporal clips, and their refusals."""

from __future__ import annotations

import json

from PIL import Image as PILImage

from serve_helpers import copy_home
from test_cli import assert_one_line_error, run_cli


def test_search_finds_on_screen_text_across_the_library_with_thumbnails(temporal_library, models_dir, tmp_path):
    home = copy_home(temporal_library, tmp_path / "home")
    found = run_cli("search", "clideo", "--json", "-q", "--thumbnails", str(tmp_path / "thumbs"), home=home,
                    models_dir=models_dir)
    assert found.returncode == 0, found.stderr
    moments = json.loads(found.stdout)["moments"]
    first = moments[0]
    assert first["path"].endswith("3.mp4") and "text" in first["kinds"] and "words" in first["matched_by"]
    assert any("clideo" in line["text"].lower() for line in first["lines"])
    assert 0 <= first["start_s"] <= first["end_s"] <= 6.2
    with PILImage.open(first["thumbnail"]) as image:  # a real frame of the moment
        assert image.format == "JPEG" and max(image.size) <= 320
    assert (home / "library.search.sqlite").is_file()
    text_only = json.loads(run_cli("search", "clideo", "--kind", "speech", "--json", "-q", home=home,
                                   models_dir=models_dir).stdout)["moments"]
    assert all(moment["kinds"] == ["speech"] for moment in text_only)
    plain = run_cli("search", "clideo", "-q", home=home, models_dir=models_dir)
    assert plain.stdout.startswith(" 1. 3.mp4") and "text" in plain.stdout.splitlines()[1]
    wrong_kind = run_cli("search", "clideo", "--kind", "scenes", home=home)
    assert wrong_kind.returncode == 2 and "invalid choice: 'scenes'" in wrong_kind.stderr
    assert_one_line_error(run_cli("search", "clideo", "--video", "nowhere.mp4", home=home, models_dir=models_dir), 2,
                          "no video of the library")
    assert_one_line_error(run_cli("search", "clideo", "--since", "last week", home=home, models_dir=models_dir), 2,
                          "give a date")
    (home / "library.search.sqlite").write_bytes(b"damaged" * 1000)
    damaged = run_cli("search", "clideo", "-q", home=home, models_dir=models_dir)
    assert damaged.returncode != 0 and "search --rebuild" in damaged.stderr and "Traceback" not in damaged.stderr
    rebuilt = run_cli("search", "--rebuild", "-q", home=home, models_dir=models_dir)
    assert rebuilt.returncode == 0 and "2 videos" in rebuilt.stderr


def test_ask_over_the_library_lists_the_video_with_its_evidence(temporal_library, models_dir, tmp_path):
    home = copy_home(temporal_library, tmp_path / "home")
    result = run_cli("ask", "--library", "Which videos show the clideo.com watermark, and when?", "-q", home=home,
                     models_dir=models_dir, timeout=900)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[1/") and "3.mp4" in lines[0]  # streamed before the answer
    answer = next(line for line in lines if line.startswith("Answer:"))
    assert "3.mp4" in answer and "None found" not in answer
    assert any(line.startswith("Confidence:") for line in lines)
    assert any("3.mp4" in line and "[text]" in line for line in lines)  # the on-screen text as evidence
    as_json = json.loads(run_cli("ask", "--library", "Which videos show the clideo.com watermark, and when?", "-q",
                                 "--json", home=home, models_dir=models_dir, timeout=900).stdout)
    listed = as_json["videos"]
    assert listed and listed[0]["name"] == "3.mp4" and 0 < as_json["confidence"] <= 0.85
    assert_one_line_error(run_cli("ask", "--library", "which?", "--choice", "a", home=home), 2,
                          "--choice does not go with --library")


def test_a_question_about_which_of_several_videos_is_a_library_question(tmp_path):
    from vidagent.cli import _asks_which_videos, build_parser

    folder = tmp_path / "clips"
    folder.mkdir()

    def routed(*argv: str) -> bool:
        return _asks_which_videos(build_parser().parse_args(["ask", *argv]))

    assert routed("a.mp4", "b.mp4", "Which of these videos show a dog, and when?")
    assert routed(str(folder), "what clips have a boat in them?")
    assert not routed("a.mp4", "Which videos show a dog?")  # one video: its planner answers
    assert not routed("a.mp4", "b.mp4", "Which video shows the dog in the photo?")  # one of them: peil compares
    assert not routed("a.mp4", "photo.jpg", "Which videos show this?")  # an image: peil
    assert not routed("a.mp4", "b.mp4", "Which videos show a dog?", "--planner", "peil")
    assert not routed("a.mp4", "b.mp4", "Which videos show a dog?", "--choice", "a")
