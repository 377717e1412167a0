"""The command line: one clear line and a non-zero exit for bad input, never a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vidagent.perception.node_assets import detector_assets_installed

from conftest import frame_at, video_path


def run_cli(*args: str, home: Path, models_dir: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIDAGENT_HOME": str(home)}
    if models_dir is not None:
        env["VIDAGENT_MODELS"] = str(models_dir)
    return subprocess.run([sys.executable, "-m", "vidagent.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess, code: int, fragment: str) -> None:
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vidagent: error:"), result.stderr
    assert fragment in lines[0]
    assert "Traceback" not in result.stderr


def test_missing_file(tmp_path):
    result = run_cli("ask", str(tmp_path / "nope.mp4"), "what happens?", home=tmp_path)
    assert_one_line_error(result, 2, "no such file")


def test_not_a_video(tmp_path):
    path = tmp_path / "notes.mp4"
    path.write_text("hello\n" * 100)
    assert_one_line_error(run_cli("index", str(path), home=tmp_path), 2, "notes.mp4")


def test_audio_only_file(tmp_path):
    result = run_cli("ask", str(video_path("github_LLaMA-Factory/4.mp3")), "what is said?", home=tmp_path)
    assert_one_line_error(result, 2, "no video stream")


def test_zero_length_file(tmp_path):
    path = tmp_path / "empty.mp4"
    path.touch()
    assert_one_line_error(run_cli("index", str(path), home=tmp_path), 2, "empty.mp4")


def test_the_question_comes_last_and_every_source_is_checked_first(tmp_path):
    clip, other = video_path("github_LLaMA-Factory/4.mp4"), video_path("github_LLaMA-Factory/3.mp4")
    assert_one_line_error(run_cli("ask", str(clip), str(other), home=tmp_path), 2, "the question comes last")
    result = run_cli("ask", str(clip), str(tmp_path / "gone.jpg"), "what is drawn?", home=tmp_path)
    assert_one_line_error(result, 2, "gone.jpg: no such file")
    result = run_cli("ask", str(clip), str(other), "what is drawn?", "--planner", "react", home=tmp_path)
    assert_one_line_error(result, 2, "the react planner answers about one video, and was given 2 sources")


def test_empty_question(tmp_path):
    assert_one_line_error(run_cli("ask", str(video_path("github_LLaMA-Factory/4.mp4")), "  ", home=tmp_path), 2,
                          "question is empty")


def test_llm_server_down(tmp_path, models_dir):
    if not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed")
    result = run_cli("ask", str(video_path("github_LLaMA-Factory/4.mp4")), "what is drawn?", "-q",
                     "--base-url", "http://127.0.0.1:9/v1", "--model", "any", "--no-cache",
                     home=tmp_path, models_dir=models_dir)
    assert_one_line_error(result, 4, "127.0.0.1:9")


def test_models_list_names_what_is_installed(tmp_path, models_dir):
    from vidagent.models.install import installed_models

    installed = installed_models(models_dir)
    result = run_cli("models", "list", home=tmp_path, models_dir=models_dir)
    assert result.returncode == 0
    for name, path in installed.items():
        assert f"{name}: {path}" in result.stdout
    empty = run_cli("models", "list", home=tmp_path, models_dir=tmp_path / "none")
    assert empty.returncode == 0 and "no models installed" in empty.stdout


def test_settings_lists_every_setting_its_variable_and_whether_it_changes_answers_and_hides_keys(tmp_path,
                                                                                                monkeypatch):
    monkeypatch.setenv("VIDAGENT_CAPTION_LINES", "9")
    monkeypatch.setenv("VIDAGENT_LLM_API_KEY", "sk-secret-123")
    monkeypatch.setenv("VIDAGENT_LLM_BASE_URL", "http://localhost:1/v1")
    table = run_cli("settings", home=tmp_path)
    assert table.returncode == 0 and "sk-secret-123" not in table.stdout
    row = next(line for line in table.stdout.splitlines() if " tools.caption_lines " in line)
    assert row.startswith("= ") and row.split()[2] == "9" and row.endswith("VIDAGENT_CAPTION_LINES*")
    listed = json.loads(run_cli("settings", "--json", home=tmp_path).stdout)
    by_name = {item["name"]: item for item in listed}
    assert by_name["llm.api_key"]["value"] == "(set)" and not by_name["llm.api_key"]["answers"]
    assert by_name["home"]["value"] == str(tmp_path) and by_name["home"]["set"] == ["VIDAGENT_HOME"]
    from vidagent.config import Settings

    assert {v for item in listed for v in item["variables"]} == set(Settings.environment())
    # then every planner's options: their defaults and ranges, each set with --planner-option (issue 54)
    option = by_name["planners.react.unusable_replies"]
    assert option["value"] == 2 and option["range"] == [1, 10] and option["planner_option"] == "unusable_replies"
    assert by_name["planners.traveler.opening"]["value"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    row = next(line for line in table.stdout.splitlines() if " planners.peil.step_chars " in line)
    assert row.startswith("= ") and row.endswith("--planner-option step_chars=VALUE (20 to 10000)")


@pytest.fixture(scope="module")
def dev_question(tmp_path_factory, models_dir):
    """A dev-set question, its video, and one vidagent home for the end-to-end runs of this module."""
    from vidagent.models.install import installed_models

    if "qwen2.5-1.5b" not in installed_models(models_dir) or not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed")
    item = next(json.loads(line) for line in (video_path("..") / "qa" / "dev.jsonl").read_text().splitlines()
                if json.loads(line)["id"] == "dev_dog_2")
    video = video_path(item["video"].removeprefix("videos/"))
    return item, video, tmp_path_factory.mktemp("e2e-home")


def ask_json(dev_question, models_dir, *options: str) -> tuple[dict, list[str]]:
    """``vidagent ask --json --trace`` on the dev question with ``options``: the answer, and the arguments."""
    item, video, home = dev_question
    args = ["ask", str(video), item["question"], *options, "--json", "--trace", "-q"]
    for choice in item["choices"]:
        args += ["--choice", choice]
    result = run_cli(*args, home=home, models_dir=models_dir, timeout=1200)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), args


@pytest.mark.models
@pytest.mark.slow
def test_end_to_end_multiple_choice_from_the_dev_set(dev_question, models_dir):
    """The real stack (detector, OCR, Whisper, E5, Qwen2.5 1.5B) answers a dev-set question via the CLI, by react."""
    item, video, home = dev_question
    answer, args = ask_json(dev_question, models_dir, "--planner", "react")
    assert set(answer) >= {"answer", "choice_index", "evidence", "usage", "trace"}
    assert answer["choice_index"] in range(5) and answer["answer"] == item["choices"][answer["choice_index"]]
    assert answer["usage"]["llm_calls"] >= 1 and answer["usage"]["prompt_tokens"] > 0
    assert answer["usage"]["seconds"] > 0
    assert answer["evidence"] and all(0 <= e["start_s"] < e["end_s"] <= 9.7 for e in answer["evidence"])
    trace = answer["trace"]
    assert trace[0]["type"] == "task" and trace[0]["question"] == item["question"]
    # no model call chooses the memories (--memory-selection tools): the automatic overview comes first
    assert (trace[1]["type"], trace[1]["tool"]) == ("tool_call", "caption_retrieval")
    chain = [step for step in trace if step.get("how") not in ("likelihood", "continuation")]
    assert [step["parent_id"] for step in chain] == [None] + list(range(len(chain) - 1))  # ReAct is a chain
    scored = [step for step in trace if step.get("how") in ("likelihood", "continuation")]
    assert scored and all(step["parent_id"] == chain[-1]["id"] for step in scored)  # then its answer's options scored
    assert answer["confidence"] is not None and answer["planner"] == "react"
    assert all(e["source"] == answer["video_id"] for e in answer["evidence"])
    # Asking again is answered from the response cache: no new LLM calls.
    again = json.loads(run_cli(*args, home=home, models_dir=models_dir, timeout=900).stdout)
    assert again["choice_index"] == answer["choice_index"] and again["usage"]["llm_calls"] == 0


@pytest.mark.models
@pytest.mark.slow
def test_end_to_end_the_default_with_the_embedded_model_reads_chosen_lines_and_scores_the_options(dev_question,
                                                                                                 models_dir):
    """No --planner with the embedded model: caption_only reads at most five lines of the memory chosen by retrieval
    and coverage, and the option is read off the options' probabilities in every order, with a confidence."""
    item = dev_question[0]
    answer, _ = ask_json(dev_question, models_dir)
    assert answer["planner"] == "caption_only" and answer["choice_index"] in range(5)
    assert answer["answer"] == item["choices"][answer["choice_index"]]
    assert 0 < answer["confidence"] <= 1 and answer["artifacts"]["segments_read"] <= 5
    orders = answer["artifacts"]["option_probabilities"]
    assert len(orders) == 5 and all(abs(sum(order) - 1) < 1e-3 for order in orders)
    assert answer["usage"]["llm_calls"] == 5 and len(answer["evidence"]) <= 5


@pytest.mark.models
@pytest.mark.slow
def test_end_to_end_mcts_search_tree_on_a_dev_question(dev_question, models_dir):
    """``--planner mcts`` with the real stack: two solutions searched, the tree in --json, a vote."""
    home = dev_question[2]
    answer, args = ask_json(dev_question, models_dir, "--planner", "mcts", "--planner-option", "n=2")
    assert answer["planner"] == "mcts" and answer["choice_index"] in range(5)
    trace = answer["trace"]
    ids = [step["id"] for step in trace]
    assert ids == list(range(len(trace))) and trace[0]["type"] == "task"
    assert all(step["parent_id"] in ids[:i] for i, step in enumerate(trace) if i)  # a tree, parents first
    search = answer["artifacts"]["search"]
    assert [it["iteration"] for it in search["iterations"]] == [1, 2]
    leaves = [it["leaf"] for it in search["iterations"]]
    assert len(set(leaves)) == 2  # two solutions, each its own leaf
    assert {node["step_id"] for node in search["nodes"]} <= set(ids)
    evaluations = [step for step in trace if step["type"] == "evaluation" and step["text"].startswith("iteration")]
    assert [step["score"] for step in evaluations] == [1.0 if not it["failed"] else -1.0 for it in search["iterations"]]
    assert sum(c["votes"] for c in answer["candidates"]) <= 2 and answer["usage"]["llm_calls"] >= 2
    plain = [a for a in args if a not in ("--json", "--trace")]
    human = run_cli(*plain, home=home, models_dir=models_dir, timeout=900)  # answered from the cache
    assert human.returncode == 0 and "Trace (mcts):" not in human.stdout
    assert re.match(r"Answer: [A-E]\. ", human.stdout)  # the option by its letter


@pytest.mark.models
@pytest.mark.slow
def test_end_to_end_traveler_on_a_dev_question(dev_question, models_dir):
    """``--planner traveler`` with the real stack, one short round: frames viewed, the bank, an answer."""
    answer, _ = ask_json(dev_question, models_dir, "--planner", "traveler", "--planner-option", "max_iterations=1",
                         "--planner-option", "questions=1")
    assert answer["planner"] == "traveler" and answer["choice_index"] in range(5)
    kinds = [step["type"] for step in answer["trace"]]
    assert kinds.count("plan") == 2 and kinds.count("evaluation") >= 1 and kinds[-1] == "final_answer"
    tools = [step["tool"] for step in answer["trace"] if step["type"] == "tool_call"]
    assert tools[:6] == ["frame_description"] * 6 and set(tools[6:]) <= {"frame_question_answering"}
    bank = answer["artifacts"]["memory_bank"]
    assert len(bank) >= 5 and all(float(key) <= 9.7 for key in bank)
    assert len(answer["artifacts"]["frames_viewed"]) >= 8  # 5 single frames and a window
    assert answer["usage"]["llm_calls"] >= 4


@pytest.fixture(scope="module")
def peil_home(tmp_path_factory, models_dir):
    from vidagent.models.install import installed_models

    if "qwen2.5-1.5b" not in installed_models(models_dir) or not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed")
    return tmp_path_factory.mktemp("peil-home")


def ask_sources(home: Path, models_dir: Path, *args: str) -> dict:
    result = run_cli("ask", *args, "--json", "--trace", "-q", "--planner-option", "max_steps=4",
                     "--planner-option", "attempts=2", home=home, models_dir=models_dir, timeout=1800)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.models
@pytest.mark.slow
def test_end_to_end_peil_over_two_videos(peil_home, models_dir):
    """Two shared clips, a question that needs both: the real stack with PEIL, chosen for several sources."""
    dog, guitar = video_path("github_InternVideo/example1.mp4"), video_path("github_Ask-Anything/playing_guitar.mp4")
    answer = ask_sources(peil_home, models_dir, str(dog), str(guitar), "Which of the two videos shows a dog?",
                         "--choice", "the first video", "--choice", "the second video")
    assert answer["planner"] == "peil" and [s["kind"] for s in answer["task"]["sources"]] == ["video", "video"]
    summaries = answer["artifacts"]["sources"]
    assert summaries[0].startswith(f"visual[0] ({dog.name}): an 8.0 s video, given by the user") and "dog" in summaries[0]
    assert summaries[1].startswith(f"visual[1] ({guitar.name}): a 10.0 s video, given by the user") and \
        "dog" not in summaries[1]
    assert answer["choice_index"] in (0, 1)  # a 1.5B model's pick is not a property of the code (right here)
    narrated = [step["arguments"] for step in answer["trace"] if step["type"] == "tool_call" and step["automatic"]]
    inspections = [step for step in answer["trace"] if step["type"] == "inspection"]
    assert [step["label"] for step in inspections[:2]] == ["visual[0]", "visual[1]"]
    checks = answer["artifacts"]["checks"]
    assert 1 <= len(checks) <= 2 and checks[-1]["mode"] == "self_check"
    # each attempt looks at both first (a second attempt, after a failed self-check, looks again)
    assert narrated == [{"query": None, "visual": 0}, {"query": None, "visual": 1}] * len(checks)
    source_ids = {s["id"] for s in answer["task"]["sources"]}
    assert all(e["source"].split("@")[0].split("[")[0] in source_ids for e in answer["evidence"])


@pytest.mark.models
@pytest.mark.slow
def test_end_to_end_peil_over_an_image_and_a_video(peil_home, models_dir, tmp_path):
    """An image beside a video: both summarised for the planner, the image's content read by the describer."""
    from PIL import Image as PILImage

    photo = tmp_path / "photo.png"
    PILImage.fromarray(frame_at("github_Video-LLaMA/skateboarding_dog.mp4", 5.0)).save(photo)
    video = video_path("github_InternVideo/example1.mp4")
    answer = ask_sources(peil_home, models_dir, str(photo), str(video),
                         "Does the video show the same kind of animal as the photo?", "--choice", "yes",
                         "--choice", "no")
    assert [s["kind"] for s in answer["task"]["sources"]] == ["image", "video"]
    image_summary, video_summary = answer["artifacts"]["sources"][:2]
    assert image_summary.startswith("visual[0] (photo.png): a ") and " image, given by the user" in image_summary
    assert "dog" in image_summary and "dog" in video_summary
    assert answer["choice_index"] in (0, 1) and answer["usage"]["llm_calls"] >= 2
