"""Every planner on a memory imported from released captions (EgoSchema's LaViLa captions, a real
slice), with a scripted model and with a real embedded one, and ``vidagent eval`` over imported
memories: found by the benchmark's namespace, segments read counted, resumed after kill -9."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from vidagent.agent.steps import EvaluationStep, ObservationStep
from vidagent.config import Settings, ToolShapes
from vidagent.eval.runner import RunConfig, run_eval
from vidagent.llm.base import Message
from vidagent.memory.caption_import import ImportOptions, import_captions
from vidagent.memory.store import Library
from vidagent.perception.suite import text_embedder
from vidagent.session import Session

from conftest import DATA
from fakes import HashingEmbedder, ScriptedLLM, scripted_perception
from test_eval_runner import SMALL_MODEL, comparable, kill_after_rows, read_rows

EGO = DATA / "benchmarks" / "egoschema"
PLANNERS = {  # each planner, bounded so a test question stays short
    "react": {"max_steps": 3},
    "mcts": {"n": 1, "max_depth": 3},
    "traveler": {"max_iterations": 1, "questions": 1},
    "peil": {"attempts": 1, "max_steps": 2},
    "caption_only": {},
    "random": {},
}
SECONDS = 40  # captions kept of each video in the slice: short prompts for the small models


@pytest.fixture(scope="module")
def ego(tmp_path_factory, models_dir) -> tuple[Settings, Path, list[dict]]:
    """A library holding three EgoSchema development videos as LLoVi released their captions (the first
    SECONDS of each), and those videos' questions and answers in the benchmark's own files."""
    if not (EGO / "lavila_subset.json").is_file():
        pytest.skip("the EgoSchema captions are not available")
    home = tmp_path_factory.mktemp("imported")
    questions = json.loads((EGO / "questions_dev.json").read_text())[:3]
    answers = json.loads((EGO / "subset_answers_dev.json").read_text())
    captions = json.loads((EGO / "lavila_subset.json").read_text())
    data = home / "data"
    data.mkdir()
    (data / "questions_dev.json").write_text(json.dumps(questions))
    (data / "subset_answers_dev.json").write_text(json.dumps({q["q_uid"]: answers[q["q_uid"]] for q in questions}))
    slice_file = data / "lavila_slice.json"
    slice_file.write_text(json.dumps({q["q_uid"]: captions[q["q_uid"]][:SECONDS] for q in questions}))
    settings = Settings(home=home, models=models_dir, experience="none").with_llm(model=SMALL_MODEL, cache=False,
                                                                                  threads=1)
    with Library(settings.library_path) as library:
        import_captions(library, text_embedder(settings), slice_file, ImportOptions(namespace="egoschema"))
    return settings, data / "questions_dev.json", questions


ACTIONS = ("picks a bowl", "washes the tin with the sponge", "pours the water from the bowl", "opens the tap",
           "dries a plate with a towel")


@pytest.fixture(scope="module")
def ego_rows(tmp_path_factory) -> tuple[Settings, Path, list[dict]]:
    """Three videos of captions in LLoVi's LaViLa format and EgoSchema's question files (written here, a
    caption a second), imported with the hashing embedder: the planners' logic without a model or the data."""
    home = tmp_path_factory.mktemp("imported-rows")
    data = home / "data"
    data.mkdir()
    ids = [f"0000000{i}-aaaa-bbbb-cccc-00000000000{i}" for i in range(3)]
    questions = [{"q_uid": uid, "google_drive_id": "", "question": "What is C mainly doing in the video?",
                  **{f"option {i}": text for i, text in enumerate(
                      ("C is cooking.", "C is cleaning dishes.", "C is doing laundry.", "C is reading.",
                       "C is painting."))}} for uid in ids]
    (data / "questions_dev.json").write_text(json.dumps(questions))
    (data / "subset_answers_dev.json").write_text(json.dumps({uid: 1 for uid in ids}))
    slice_file = data / "lavila_slice.json"
    slice_file.write_text(json.dumps({uid: [f"#C C {ACTIONS[(n + v) % len(ACTIONS)]}" for n in range(SECONDS)]
                                      for v, uid in enumerate(ids)}))
    settings = Settings(home=home, models=home / "models", experience="none")
    with Library(settings.library_path) as library:
        import_captions(library, HashingEmbedder(), slice_file, ImportOptions(namespace="egoschema"))
    return settings, data / "questions_dev.json", questions


def _choices(question: dict) -> list[str]:
    return [question[f"option {i}"] for i in range(5)]


def _any_step(messages: list[Message]) -> str:
    """A reply every planner can go on from: an answer (its option number) for whatever was asked."""
    if "Does answering it need" in messages[-1].content:
        return "no"
    return "Thought: the captions settle it.\nFinal Answer: 1"


@pytest.mark.parametrize("planner", sorted(PLANNERS))
def test_every_planner_answers_an_imported_question_with_a_scripted_model(ego_rows, planner):
    settings, _, questions = ego_rows
    question = questions[0]
    llm = ScriptedLLM([_any_step] * 200)
    with Session(settings, llm=llm, perception=scripted_perception()) as session:
        answer = session.ask(f"egoschema:{question['q_uid']}", question["question"], _choices(question),
                             planner=planner, planner_options=PLANNERS[planner])
    assert answer.choice_index is not None and answer.text == _choices(question)[answer.choice_index]
    read = [e for step in answer.trace.of_type(ObservationStep) for e in step.evidence]
    assert all(e.source == f"egoschema:{question['q_uid']}" and 0 <= e.start_s <= e.end_s <= SECONDS for e in read)
    if planner in ("react", "mcts", "traveler", "peil"):
        assert read, "the planner read the captions through its tools"
        assert "LaViLa" in llm.requests[0][0].content or any("LaViLa" in m.content for r in llm.requests for m in r)
    errors = [s.text for s in answer.trace.of_type(ObservationStep) if s.is_error]
    assert not any("Traceback" in text or "internal error" in text for text in errors)


def test_caption_only_reads_a_few_captions_evenly_spread_when_told_how_many(ego_rows):
    settings, _, questions = ego_rows
    question = questions[0]
    for lines, starts in ((5, ["0.0", "10.0", "20.0", "29.0", "39.0"]), (1, ["20.0"])):
        llm = ScriptedLLM(["Answer: 1"])
        with Session(settings, llm=llm, perception=scripted_perception()) as session:
            answer = session.ask(f"egoschema:{question['q_uid']}", question["question"], _choices(question),
                                 planner="caption_only", planner_options={"lines": lines})
        shown = re.findall(r"^\[(\d+\.\d)-", llm.requests[0][-1].content, flags=re.MULTILINE)
        assert shown == starts and answer.artifacts["segments_read"] == lines and answer.choice_index == 1
    with Session(settings, llm=ScriptedLLM([]), perception=scripted_perception()) as session:
        with pytest.raises(Exception, match="lines must be (0|between 0)"):
            session.ask(f"egoschema:{question['q_uid']}", question["question"], _choices(question),
                        planner="caption_only", planner_options={"lines": -1})


def test_peil_is_offered_no_module_a_memory_of_captions_cannot_serve(ego_rows):
    """No frames, no speech: the image modules, get_frame, on-screen text and the speech modules are
    withheld (each could only answer with an error); a user naming one simply goes without it."""
    settings, _, questions = ego_rows
    question = questions[0]
    for options in ({"attempts": 1, "max_steps": 2}, {"attempts": 1, "max_steps": 2,
                                                     "modules": "video_narration,get_frame,asr"}):
        llm = ScriptedLLM([_any_step] * 20)
        with Session(settings, llm=llm, perception=scripted_perception()) as session:
            answer = session.ask(f"egoschema:{question['q_uid']}", question["question"], _choices(question),
                                 planner="peil", planner_options=options)
        assert answer.choice_index is not None
        offered = "\n".join(m.content for m in llm.requests[0])
        assert "video_narration(" in offered
        for withheld in ("get_frame(", "object_detect(", "caption(", "region_ground(", "text_ground(",
                         "text_detect(", "asr(", "subtitle_reason(", "subtitle_ground("):
            assert withheld not in offered, withheld
        if "modules" not in options:
            assert "narration_reason(" in offered and "temporal_reason(" in offered


@pytest.mark.models
@pytest.mark.slow
@pytest.mark.parametrize("planner", sorted(PLANNERS))
def test_every_planner_answers_an_imported_question_with_the_real_embedded_model(ego, planner):
    settings, _, questions = ego
    question = questions[1]
    with Session(settings) as session:
        answer = session.ask(f"egoschema:{question['q_uid']}", question["question"], _choices(question),
                             planner=planner, planner_options=PLANNERS[planner])
    # a 135M model may name no option: what counts is that every planner runs to an answer on captions alone
    assert answer.text.strip() and answer.planner == planner
    assert answer.choice_index is None or answer.text == _choices(question)[answer.choice_index]
    assert answer.usage.llm_calls >= (0 if planner == "random" else 1)


@pytest.mark.models
@pytest.mark.slow
def test_traveler_judged_by_option_scores_with_the_real_embedded_model(ego):
    """``evaluate_by=scores`` with the 1.5B default (the small test model rarely puts an option's number
    among its likeliest first tokens): every order scored after the opening frames and after the round."""
    settings, _, questions = ego
    question = questions[1]
    with Session(settings.with_llm(model="qwen2.5-1.5b")) as session:
        answer = session.ask(f"egoschema:{question['q_uid']}", question["question"], _choices(question),
                             planner="traveler", planner_options={"max_iterations": 1, "questions": 1,
                                                                   "evaluate_by": "scores"})
    assert answer.choice_index is not None and answer.trace.last.how in ("likelihood", "forced")
    evaluations = [s.text for s in answer.trace.of_type(EvaluationStep)]
    assert sum(text.startswith("(option probabilities") for text in evaluations) == 10  # 5 orders, twice
    verdict = [text for text in evaluations if text.startswith("round 1: ")]
    assert len(verdict) == 1 and f"option {answer.choice_index} leads" in verdict[0]
    assert not any("Final Answer:" in (getattr(s, "model_output", "") or "") for s in answer.trace)  # no written verdict


@pytest.mark.models
def test_the_check_with_the_real_embedded_model_marks_evidence_and_sets_a_calibrated_confidence(ego, tmp_path):
    settings, questions_file, questions = ego
    question = questions[0]
    with Session(settings) as session:
        answer = session.ask(f"egoschema:{question['q_uid']}", question["question"], _choices(question),
                             planner="caption_only", planner_options={"choose_by": "text"}, check=True)  # one call
    data = answer.to_dict()
    check = data["check"]
    assert check["verdict"] in ("supported", "unsupported") and 1 <= check["read"] <= ToolShapes().check_spans
    assert len(check["probabilities"]) == 5 and sum(check["probabilities"]) == pytest.approx(1.0, abs=0.01)
    read = [e for e in data["evidence"] if "supports" in e]
    assert len(read) == check["read"] and sum(e["supports"] for e in read) == check["supporting"]
    assert data["abstained"] == (check["verdict"] != "supported")
    assert data["confidence"] == (0.0 if data["abstained"] else pytest.approx(
        check["probabilities"][answer.choice_index], abs=1e-3))
    assert answer.usage.llm_calls == 3  # the planner's one call, then the check's two over one prefix
    assert len(answer.trace.of_type(EvaluationStep)) == 2
    run = run_eval(RunConfig(dataset=questions_file, planner="caption_only", planner_options=(("choose_by", "text"),),
                             out=tmp_path / "checked", progress=False), replace(settings, check=True))
    assert all(r["confidence"] is not None for r in run.rows)
    assert "**Confidence** (3 answers with one" in (tmp_path / "checked" / "summary.md").read_text()


@pytest.mark.models
def test_eval_over_imported_memories_counts_segments_read_and_resumes_after_kill_9(ego, tmp_path, models_dir):
    settings, questions_file, questions = ego
    whole = run_eval(RunConfig(dataset=questions_file, planner="caption_only", out=tmp_path / "whole", progress=False),
                     settings)
    assert [r["video_path"] for r in whole.rows] == [f"egoschema:{q['q_uid']}" for q in questions]
    assert all(r["error"] is None and r["correct"] is not None for r in whole.rows)
    assert all(r["segments_read"] == SECONDS for r in whole.rows)  # every caption of the slice, in one prompt
    summary = (tmp_path / "whole" / "summary.md").read_text()
    assert "segments read/q" in summary and "LLoVi" in summary and "VideoAgent (Wang et al.)" in summary
    out = tmp_path / "killed"
    args = ["eval", str(questions_file), "--memories", "egoschema", "--planner", "caption_only", "--model", SMALL_MODEL,
            "--no-cache", "--threads", "1", "--out", str(out), "-q"]
    env = {**os.environ, "VIDAGENT_HOME": str(settings.home), "VIDAGENT_MODELS": str(models_dir)}
    kill_after_rows(args, env, out / "results.jsonl", 1)
    assert 1 <= len(read_rows(out)) < 3
    resumed = subprocess.run([sys.executable, "-m", "vidagent.cli", *args], env=env, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert comparable(read_rows(out)) == comparable(whole.rows)


def test_eval_says_when_no_memory_of_the_benchmark_was_imported(ego_rows, tmp_path):
    settings, questions_file, _ = ego_rows
    empty = replace(settings, home=tmp_path)
    with pytest.raises(Exception, match="none of the videos of questions_dev.json has a memory nextqa:<video>"):
        run_eval(RunConfig(dataset=questions_file, planner="random", memories="nextqa", out=tmp_path / "run",
                           progress=False), empty)
