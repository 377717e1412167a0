"""The eval runner: rows and reports, skipped videos, resume after a kill, local workers and Ray.

Runs use deterministic planners: ``random`` (seeded by question id, no model) and ``caption_only`` with
the real local LLM (SmolLM2-135M, temperature 0, response cache off) on two short clips.
"""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vidagent.config import Settings
from vidagent.eval.dataset import MULTIPLE_CHOICE, OPEN_ENDED, EvalItem
from vidagent.eval.errors import EvalError
from vidagent.eval.judge import judge_answer
from dataclasses import dataclass, replace
from typing import ClassVar

from vidagent.agent.answer import Answer
from vidagent.agent.baselines import RandomPlanner
from vidagent.agent.planner import Needs, build_planner, register_planner
from vidagent.agent.task import Task
from vidagent.errors import PlannerError
from vidagent.eval.report import write_comparison
from vidagent.eval.loaders import load_dataset
from vidagent.eval.runner import RunConfig, _check_folder, _identity, default_out, run_eval, settings_digest
from vidagent.prompts import prompts_digest
from vidagent.session import Session

from conftest import video_path
from fakes import ScriptedLLM

SMALL_MODEL = "smollm2-135m"
DRAWING = "github_LLaMA-Factory/4.mp4"  # 5 s, a hand draws a guitar on a tablet
BOAT = "github_Video-LLaMA/boat.mp4"    # 6 s, a tour boat on a river


def _questions() -> list[dict]:
    drawing, boat = str(video_path(DRAWING)), str(video_path(BOAT))
    options = ["a guitar", "a car", "a house", "a cat", "a tree"]
    return [
        {"id": "draw_1", "video": drawing, "type": "descriptive", "question": "What is being drawn?",
         "choices": options, "answer_index": 0},
        {"id": "draw_2", "video": drawing, "type": "descriptive", "question": "What is used to draw?",
         "choices": ["a pencil", "a brush", "a finger", "chalk", "a crayon"], "answer_index": 0},
        {"id": "boat_1", "video": boat, "type": "descriptive", "question": "What moves along the river?",
         "choices": ["a boat", "a swimmer", "a car", "a train", "a duck"], "answer_index": 0},
        {"id": "boat_2", "video": boat, "type": "temporal", "question": "What is on the river banks?",
         "choices": ["trees in blossom", "snow", "sand dunes", "cars", "cows"], "answer_index": 0},
        {"id": "draw_3", "video": drawing, "type": "causal", "question": "Why does the hand move?",
         "choices": ["to draw", "to wave", "to clean", "to point", "to eat"], "answer_index": 0},
        {"id": "boat_3", "video": boat, "type": "descriptive", "question": "What colour are the blossoms?",
         "choices": None, "answer": "pink", "accept": ["pink", "white"]},
    ]


def write_questions(path: Path, extra: list[dict] = ()) -> Path:
    path.write_text("".join(json.dumps(q) + "\n" for q in [*_questions(), *extra]))
    return path


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """One library for the module, so each clip is indexed once."""
    return tmp_path_factory.mktemp("eval-home")


@pytest.fixture(scope="module")
def settings(home, models_dir) -> Settings:
    # One LLM thread: on a shared 2-core machine, llama.cpp with every core is several times slower.
    # Memory across questions off unless a test turns it on: these tests are about the runner.
    return Settings(home=home, models=models_dir, experience="none").with_llm(model=SMALL_MODEL, cache=False,
                                                                              threads=1)


def comparable(rows: list[dict]) -> dict[str, dict]:
    """Rows by id without the fields that measure time or depend on what the model's KV cache held
    before (a resumed run or another worker starts with another cache), and with numbers compared to within
    ``NUMBER_TOLERANCE`` (those written into text left out): a prompt read in other chunks (a cache that held
    another part of it) gives log-probabilities a few thousandths apart (measured: -0.194 and -0.189 for one
    option's mean). The answers themselves must be the same."""
    out = {}
    for row in rows:
        row = _tolerant(json.loads(json.dumps(row)))
        row.pop("wall_s")
        for usage in (row["usage"], row["judge_usage"]):
            usage.pop("seconds", None)
            usage.pop("reused_prompt_tokens", None)
        for step in row["trace"]:
            step.pop("seconds", None)
            if step["type"] == "memory":  # entry ids number every run's memories in one library
                step["text"] = re.sub(r"#\d+", "#", step["text"])
        out[row["id"]] = row
    return out


@pytest.mark.clips
def test_prompts_and_answer_settings_are_part_of_a_runs_identity(tmp_path, settings):
    qa = write_questions(tmp_path / "qa.jsonl")
    first = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "run", progress=False), settings)
    meta = json.loads((first.out / "run.json").read_text())
    assert meta["prompts"] is None  # a model-free planner sends no prompt
    assert meta["settings"] == settings_digest(settings) and meta["answer_settings"]["segment_seconds"] == 2.0
    assert settings_digest(settings) == settings_digest(replace(settings, home=tmp_path / "elsewhere"))
    with pytest.raises(EvalError, match="other settings that change answers"):
        run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "run", progress=False),
                 settings.with_llm(temperature=0.7))
    meta["settings"] = None  # as a folder written before settings were recorded
    (first.out / "run.json").write_text(json.dumps(meta))
    with pytest.raises(EvalError, match="other settings that change answers"):
        run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "run", progress=False), settings)
    dataset = load_dataset(qa)
    identity = _identity(dataset, RunConfig(dataset=qa, planner="caption_only"), settings)
    assert identity["prompts"] == prompts_digest()
    (tmp_path / "older").mkdir()
    (tmp_path / "older" / "run.json").write_text(json.dumps({**identity, "prompts": "0" * 64}))
    with pytest.raises(EvalError, match="other prompts"):  # made with other templates, budgets or stop strings
        _check_folder(tmp_path / "older", identity)


def test_a_planners_defaults_are_part_of_a_runs_identity(tmp_path, settings):
    qa = write_questions(tmp_path / "qa.jsonl")
    identity = _identity(load_dataset(qa), RunConfig(dataset=qa, planner="react"), settings)
    assert identity["planner_options"] == {} and identity["planner_config"]["max_steps"] == 8  # given ones, all
    given = _identity(load_dataset(qa), RunConfig(dataset=qa, planner="react", planner_options=(("max_steps", "3"),)),
                      settings)
    assert given["planner_config"]["max_steps"] == 3
    (tmp_path / "older").mkdir()
    default_then = {**identity, "planner_config": {**identity["planner_config"], "max_steps": 6}}
    (tmp_path / "older" / "run.json").write_text(json.dumps(default_then))  # a default that has changed since
    with pytest.raises(EvalError, match="other planner options"):
        _check_folder(tmp_path / "older", identity)


NUMBER_TOLERANCE = 0.02


class _Near(float):
    """A number equal to any other within ``NUMBER_TOLERANCE``."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and abs(float(self) - float(other)) <= NUMBER_TOLERANCE

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = float.__hash__


def _tolerant(value):
    if isinstance(value, float):
        return _Near(value)
    if isinstance(value, str):
        return re.sub(r"-?\d+\.\d{3,}", "<number>", value)
    if isinstance(value, list):
        return [_tolerant(item) for item in value]
    if isinstance(value, dict):
        return {key: _tolerant(item) for key, item in value.items()}
    return value


def kill_after_rows(args: list[str], env: dict[str, str], results: Path, rows: int) -> None:
    """Start ``vidagent ARGS`` and kill -9 it (its whole process group) once ``results`` holds ``rows`` rows."""
    process = subprocess.Popen([sys.executable, "-m", "vidagent.cli", *args], env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if results.exists() and results.read_text().count("\n") >= rows:
            break
        time.sleep(0.02)
    assert process.poll() is None, "the run finished before it could be killed"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def read_rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]


# -- random planner: fast, no models ---------------------------------------------------------------
@pytest.mark.clips
def test_random_run_writes_rows_and_report_and_skips_a_missing_video(tmp_path, settings):
    missing = {"id": "gone_1", "video": "nowhere/absent.mp4", "type": "descriptive", "question": "What?",
               "choices": ["a", "b", "c", "d", "e"], "answer_index": 1}
    qa = write_questions(tmp_path / "qa.jsonl", [missing])
    messages: list[str] = []
    result = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "run", progress=False), settings,
                      log=messages.append)
    assert [r["id"] for r in result.rows] == [q["id"] for q in _questions()]
    assert result.missing == [("gone_1", "nowhere/absent.mp4")]
    assert len(messages) == 1 and "skipping 1 of 7 questions" in messages[0] and "absent.mp4" in messages[0]
    assert (tmp_path / "run" / "missing.txt").read_text() == "gone_1\tnowhere/absent.mp4\n"
    for name in ("summary.md", "summary.json", "accuracy.png", "run.json"):
        assert (tmp_path / "run" / name).stat().st_size > 0
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "| all (Acc_A) | 6 |" in summary and "1 skipped (video not found)" in summary
    mc = [r for r in result.rows if r["task"] == MULTIPLE_CHOICE]
    assert all(r["correct"] == (r["choice_index"] == 0) for r in mc)
    assert all(r["usage"]["llm_calls"] == 0 for r in result.rows)
    again = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "run", progress=False), settings,
                     log=messages.append)
    assert again.answered_now == 0 and comparable(again.rows) == comparable(result.rows)


@pytest.mark.clips
def test_a_cut_off_results_file_resumes_to_the_uninterrupted_rows(tmp_path, settings):
    qa = write_questions(tmp_path / "qa.jsonl")
    whole = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "whole", progress=False), settings)
    cut = tmp_path / "cut"
    run_eval(RunConfig(dataset=qa, planner="random", out=cut, progress=False), settings)
    lines = (cut / "results.jsonl").read_text().splitlines(keepends=True)
    # What a kill in the middle of a write leaves: two whole rows and half of the third.
    (cut / "results.jsonl").write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2])
    resumed = run_eval(RunConfig(dataset=qa, planner="random", out=cut, progress=False), settings)
    assert resumed.answered_now == len(lines) - 2
    assert comparable(resumed.rows) == comparable(whole.rows)
    assert len(read_rows(cut)) == len(whole.rows)  # the half row was dropped, not kept beside its redo


@pytest.mark.clips
def test_two_local_worker_processes_equal_the_serial_run(tmp_path, settings):
    qa = write_questions(tmp_path / "qa.jsonl")
    serial = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "serial", progress=False), settings)
    parallel = run_eval(RunConfig(dataset=qa, planner="random", workers=2, out=tmp_path / "parallel",
                                  progress=False), settings)
    assert comparable(parallel.rows) == comparable(serial.rows)


@pytest.mark.clips
def test_a_folder_holding_another_planner_is_refused(tmp_path, settings):
    qa = write_questions(tmp_path / "qa.jsonl")
    run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "run", progress=False), settings)
    with pytest.raises(EvalError, match="holds a run with planner 'random'"):
        run_eval(RunConfig(dataset=qa, planner="caption_only", out=tmp_path / "run", progress=False), settings)


@pytest.mark.clips
def test_a_budget_is_part_of_a_runs_identity_and_name(tmp_path, settings):
    qa = write_questions(tmp_path / "qa.jsonl")
    first = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "run", progress=False,
                               budget="calls=2"), settings)
    assert json.loads((first.out / "run.json").read_text())["budget"] == "calls=2"
    with pytest.raises(EvalError, match="budget"):
        run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "run", progress=False, budget="calls=4"),
                 settings)
    with pytest.raises(EvalError, match="calls must be a number"):
        run_eval(RunConfig(dataset=qa, planner="random", progress=False, budget="calls=many"), settings)
    assert default_out(load_dataset(qa), "react", (), budget="calls=4").name == "qa-react-budget_calls_4"


@dataclass
class FixedPlanner:
    """A planner for these tests: answers the first option, or ``text``; reads no memory."""

    text: str = ""
    name: ClassVar[str] = "fixed"
    needs: ClassVar[Needs] = Needs(memory=False, llm=False)

    def run(self, task: Task, toolbox, llm, trace=None) -> Answer:
        if self.text == "{duration}":
            return Answer(task=task, text=f"{toolbox.video.duration_s:.2f}", planner=self.name)
        index = 0 if task.choices else None
        return Answer(task=task, text=self.text or (task.choices[0] if task.choices else ""), planner=self.name,
                      choice_index=index)


register_planner("always_first")(FixedPlanner)


@pytest.mark.clips
def test_planner_registry_plugs_in_new_planners(tmp_path, settings):
    qa = write_questions(tmp_path / "qa.jsonl")
    result = run_eval(RunConfig(dataset=qa, planner="always_first", out=tmp_path / "run", progress=False), settings)
    assert all(r["correct"] for r in result.rows if r["task"] == MULTIPLE_CHOICE)
    assert isinstance(build_planner("vidagent.agent.baselines:RandomPlanner"), RandomPlanner)
    assert build_planner("test_eval_runner:FixedPlanner", {"text": "x"}).text == "x"
    with pytest.raises(PlannerError, match="unknown planner 'nope'"):
        build_planner("nope")
    with pytest.raises(PlannerError, match="cannot load planner"):
        build_planner("vidagent.agent.baselines:missing")
    with pytest.raises(PlannerError, match="has no option 'n'"):
        run_eval(RunConfig(dataset=qa, planner="random", planner_options=(("n", "2"),), out=tmp_path / "bad",
                           progress=False), settings)


@pytest.mark.clips
def test_planner_options_are_part_of_a_runs_identity(tmp_path, settings):
    qa = write_questions(tmp_path / "qa.jsonl")
    first = run_eval(RunConfig(dataset=qa, planner="always_first", planner_options=(("text", "a"),),
                               out=tmp_path / "run", progress=False), settings)
    assert json.loads((first.out / "run.json").read_text())["planner_options"] == {"text": "a"}
    assert "# always_first text=a on qa" in (first.out / "summary.md").read_text()
    with pytest.raises(EvalError, match="holds a run with planner_options"):
        run_eval(RunConfig(dataset=qa, planner="always_first", planner_options=(("text", "b"),),
                           out=tmp_path / "run", progress=False), settings)
    # A folder written before runs had options resumes as a run without options.
    older = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "older", progress=False), settings)
    meta = json.loads((older.out / "run.json").read_text())
    del meta["planner_options"]
    (older.out / "run.json").write_text(json.dumps(meta))
    resumed = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "older", progress=False), settings)
    assert resumed.answered_now == 0


def test_a_question_about_part_of_a_video_is_asked_about_that_clip(tmp_path, settings):
    from vidagent.video.video import Video

    star = tmp_path / "STAR_val.json"
    star.write_text(json.dumps([{
        "question_id": "Interaction_T1_1", "question": "Which object was touched?", "video_id": "4",
        "start": 1.0, "end": 3.5, "answer": "b", "choices": [{"choice_id": i, "choice": c} for i, c in enumerate("abcd")],
    }]))
    folder = video_path(DRAWING).parent
    clipped = run_eval(RunConfig(dataset=star, videos=(folder,), planner="always_first",
                                 planner_options=(("text", "{duration}"),), out=tmp_path / "clip",
                                 progress=False), settings)
    assert float(clipped.rows[0]["prediction"]) == pytest.approx(2.5, abs=0.15)
    assert len(list((settings.home / "eval-clips").glob("4_*.mp4"))) == 1
    whole = run_eval(RunConfig(dataset=star, videos=(folder,), planner="always_first",
                               planner_options=(("text", "{duration}"),), out=tmp_path / "whole",
                               cut_clips=False, progress=False), settings)
    assert float(whole.rows[0]["prediction"]) == pytest.approx(Video(video_path(DRAWING)).duration_s, abs=0.01)


# -- the command line ----------------------------------------------------------------------------
def run_cli(*args: str, home: Path, models_dir: Path, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIDAGENT_HOME": str(home), "VIDAGENT_MODELS": str(models_dir)}
    return subprocess.run([sys.executable, "-m", "vidagent.cli", *args], env=env, capture_output=True, text=True,
                          timeout=600, **kwargs)


def assert_one_line_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vidagent: error:") and fragment in lines[0], result.stderr


@pytest.mark.clips
def test_cli_errors_are_one_line(tmp_path, home, models_dir):
    qa = write_questions(tmp_path / "qa.jsonl")
    assert_one_line_error(run_cli("eval", str(qa), "--planner", "nope", home=home, models_dir=models_dir),
                          "unknown planner 'nope'")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "video": "v.mp4", "question": "q"}\n{"id": \n')
    assert_one_line_error(run_cli("eval", str(bad), home=home, models_dir=models_dir), "line 2: not valid JSON")
    assert_one_line_error(run_cli("eval", str(qa), "--videos", str(tmp_path / "none"), home=home,
                                  models_dir=models_dir), "does not exist")
    empty = tmp_path / "empty"
    empty.mkdir()
    relative = tmp_path / "relative.jsonl"
    relative.write_text(json.dumps({"id": "r", "video": "clips/4.mp4", "question": "What?"}) + "\n")
    assert_one_line_error(run_cli("eval", str(relative), "--videos", str(empty), home=home, models_dir=models_dir),
                          "none of the videos")
    assert_one_line_error(run_cli("eval", "--compare", str(empty), home=home, models_dir=models_dir),
                          "not an eval run folder")


@pytest.mark.clips
def test_cli_compare_puts_runs_side_by_side(tmp_path, settings, home, models_dir):
    qa = write_questions(tmp_path / "qa.jsonl")
    first = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "random", progress=False), settings)
    second = run_eval(RunConfig(dataset=qa, planner="always_first", out=tmp_path / "first", progress=False),
                      settings)
    result = run_cli("eval", "--compare", str(first.out), str(second.out), "--out", str(tmp_path / "cmp"),
                     home=home, models_dir=models_dir)
    assert result.returncode == 0, result.stderr
    assert "| group | n | random acc % | always_first acc % |" in result.stdout
    assert "| all (Acc_A) | 6 |" in result.stdout
    assert (tmp_path / "cmp" / "compare.png").stat().st_size > 0
    paths = write_comparison([first.out, second.out], tmp_path / "cmp2")
    assert paths["markdown"].read_text() == (tmp_path / "cmp" / "compare.md").read_text()


# -- the real local LLM ------------------------------------------------------------------------------
@pytest.mark.models
def test_caption_only_puts_every_segment_description_in_one_prompt(settings):
    llm = ScriptedLLM(["Answer: a guitar"])
    item = EvalItem(id="x", video=DRAWING, question="What is being drawn?", task=MULTIPLE_CHOICE,
                    choices=("a car", "a guitar", "a tree"), answer_index=1, video_path=str(video_path(DRAWING)))
    with Session(settings, llm=llm) as session:
        answer = session.ask(item.video_path, item.question, item.choices, planner="caption_only")
        segments = session.index(item.video_path, progress=False).segments
    assert len(llm.requests) == 1 and answer.usage.llm_calls == 1
    prompt = llm.requests[0][-1].content
    from vidagent.tools.observed import segment_text

    assert all(segment_text(segment) in prompt for segment in segments) and len(segments) >= 2
    assert "1. a guitar" in prompt and "What is being drawn?" in prompt
    assert (answer.choice_index, answer.text, answer.planner) == (1, "a guitar", "caption_only")
    assert answer.trace[1].model_output == "Answer: a guitar" and answer.trace[1].parent_id == 0


def test_judge_reads_yes_or_no():
    item = EvalItem(id="j", video="v", question="What is thrown?", task=OPEN_ENDED, answer="a ball", accept=("toy",))
    llm = ScriptedLLM(["Yes.", "no"])
    assert judge_answer(llm, item, "an orange ball").correct is True
    verdict = judge_answer(llm, item, "a stick")
    assert verdict.correct is False and verdict.usage.llm_calls == 1
    assert "a ball / toy" in llm.requests[0][-1].content
    assert judge_answer(ScriptedLLM([]), item, "").correct is False  # nothing to judge, no call


@pytest.mark.models
def test_judged_run_grades_open_ended_answers_with_the_llm_and_counts_its_cost(tmp_path, settings):
    qa = write_questions(tmp_path / "qa.jsonl")
    result = run_eval(RunConfig(dataset=qa, planner="always_first", planner_options=(("text", "pink blossoms"),),
                                judge=True, out=tmp_path / "run", progress=False), settings)
    judged = [r for r in result.rows if r["judge"]]
    assert [r["id"] for r in judged] == ["boat_3"]  # only the open-ended question
    row = judged[0]
    assert row["match"] is True and row["correct"] is row["judge"]["correct"] and row["judge_usage"]["llm_calls"] == 1
    assert "text matching alone: 100.0 %" in (tmp_path / "run" / "summary.md").read_text()


@pytest.mark.models
def test_killed_run_resumes_to_exactly_the_uninterrupted_results(tmp_path, settings, home, models_dir):
    qa = write_questions(tmp_path / "qa.jsonl")
    # With memory across questions (validated against the known answers, so what is kept does not hang on how a
    # 135M model judges): what the killed question kept is forgotten, what the others kept is replayed.
    whole = run_eval(RunConfig(dataset=qa, planner="caption_only", out=tmp_path / "whole", progress=False,
                               experience="all", teach=True), settings)
    assert len(whole.rows) == 6 and all(r["error"] is None for r in whole.rows)
    assert all(any(step["type"] == "evaluation" for step in r["trace"]) for r in whole.rows)  # each one validated
    assert all(any(step["type"] == "memory" and step["action"] == "stored" for step in r["trace"]) for r in whole.rows)
    kept_valid: set[str] = set()  # videos with a valid memory so far: each later question about one replays it
    for row in whole.rows:
        steps = [step for step in row["trace"] if step["type"] == "memory"]
        assert any(step["action"] == "replayed" for step in steps) == (row["video"] in kept_valid), row["id"]
        if any(step["action"] == "stored" and "[rejected" not in step["text"] for step in steps):
            kept_valid.add(row["video"])
    out = tmp_path / "killed"
    args = ["eval", str(qa), "--planner", "caption_only", "--model", SMALL_MODEL, "--no-cache", "--threads", "1",
            "--out", str(out), "-q", "--experience", "all", "--teach"]
    env = {**os.environ, "VIDAGENT_HOME": str(home), "VIDAGENT_MODELS": str(models_dir)}
    kill_after_rows(args, env, out / "results.jsonl", 2)
    answered_before = len(read_rows(out))
    assert 2 <= answered_before < 6
    resumed = run_cli(*args, home=home, models_dir=models_dir)
    assert resumed.returncode == 0, resumed.stderr
    assert len(read_rows(out)) == 6
    assert comparable(read_rows(out)) == comparable(whole.rows)


@pytest.mark.models
def test_two_ray_workers_equal_the_serial_run(tmp_path, settings):
    pytest.importorskip("ray")
    qa = write_questions(tmp_path / "qa.jsonl")
    serial = run_eval(RunConfig(dataset=qa, planner="caption_only", out=tmp_path / "serial", progress=False),
                      settings)
    distributed = run_eval(RunConfig(dataset=qa, planner="caption_only", ray=True, workers=2,
                                     out=tmp_path / "ray", progress=False), settings)
    assert len(distributed.rows) == 6
    assert comparable(distributed.rows) == comparable(serial.rows)
    import ray

    assert not ray.is_initialized()  # the runner shut down the local instance it started


def test_eval_without_a_planner_runs_what_ask_answers_one_video_with():
    """`vidagent eval` once ran react when no planner was named, while `vidagent ask` answered with caption_only
    reading five lines (the embedded model's default): a user measuring the default measured another planner."""
    from vidagent.config import Settings
    from vidagent.eval.cli import chosen_planner

    embedded = Settings.from_env()
    endpoint = embedded.with_overrides(base_url="http://127.0.0.1:9/v1", model="some-model")
    assert embedded.llm.backend == "local" and endpoint.llm.backend != "local"
    assert chosen_planner(None, None, embedded) == ("caption_only", {"lines": 5, "choose_by": "auto"})
    assert chosen_planner(None, ["lines=3"], embedded) == ("caption_only", {"lines": "3", "choose_by": "auto"})
    assert chosen_planner(None, None, endpoint) == ("react", {})
    assert chosen_planner("mcts", ["n=3"], embedded) == ("mcts", {"n": "3"})
