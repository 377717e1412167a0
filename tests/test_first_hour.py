"""Issue 27, a new user's first hour: what broke when vidagent was tried as the README shows it, each
checked here against the real parts (the CLI as a process, the library, the server's service) so it
stays fixed. The page's share is in test_page.py, the server's in test_server_api.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from vidagent.agent.planner import build_planner
from vidagent.config import Settings
from vidagent.errors import PlannerError
from vidagent.memory.builder import TEMPORAL_STAGES
from vidagent.memory.store import Library
from vidagent.server.config import ServeConfig
from vidagent.server.service import VideoService
from vidagent.session import Session

from conftest import TEMPORAL_TOY, video_path
from serve_helpers import SELECTION, copy_home, tagged_llm
from fakes import ScriptedLLM as ScriptedLLMFor
from test_cli import assert_one_line_error, run_cli


def cli(*args: str, home: Path, cwd: Path | None = None, **popen: object) -> subprocess.Popen:
    env = {**os.environ, "VIDAGENT_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "vidagent.cli", *args], env=env, cwd=cwd, text=True,
                            stderr=subprocess.PIPE, **popen)  # type: ignore[call-overload]


# -- 1. a relative path ------------------------------------------------------------------------------------------------
def test_a_relative_path_keeps_the_video_where_the_server_sees_it(temporal_library, models_dir, tmp_path,
                                                                 monkeypatch):
    """`cd videos && vidagent ask yoga.mp4 ...` wrote ``yoga.mp4`` over the absolute path the server had
    registered: the video left the page and its memory was orphaned."""
    home = copy_home(temporal_library, tmp_path / "home")
    settings = replace(Settings.from_env(), home=home, models=models_dir)
    clip = video_path(TEMPORAL_TOY)
    service = VideoService(ServeConfig(settings=settings, video_dirs=(clip.parent,)),
                           Session(settings, llm=tagged_llm()))
    try:
        video_id = service.register_path(str(clip)).video_id
        monkeypatch.chdir(clip.parent)
        with Session(settings, llm=tagged_llm()) as session:
            session.index(clip.name, TEMPORAL_STAGES, progress=False)  # what ask does first, by a relative name
        with Library(settings.library_path) as library:
            assert library.video_row(video_id)["path"] == str(clip)
        assert video_id in {entry.video_id for entry in service.videos()}
        assert next(f for f in service.folder_files() if f["path"] == str(clip))["registered"]
    finally:
        service.close()


# -- 9. the command line ------------------------------------------------------------------------------------------------
def test_a_closed_pipe_ends_the_output_quietly(tmp_path):
    """`vidagent ask ... --json | head` ended in "internal error: BrokenPipeError", exit 70."""
    process = cli("ask", str(video_path(TEMPORAL_TOY)), "What is drawn?", "--choice", "a guitar", "--choice", "a car",
                  "--planner", "random", "--json", "--trace", home=tmp_path, stdout=subprocess.PIPE)
    process.stdout.close()  # the reader is gone before the answer is printed
    _, error = process.communicate(timeout=300)
    assert "Error" not in error and "internal error" not in error, error
    assert process.returncode == 141  # what a shell reports for a tool a closed pipe stopped


def test_eval_without_a_dataset_is_a_usage_error(tmp_path):
    assert_one_line_error(run_cli("eval", home=tmp_path), 2, "give an annotation file")
    help_text = subprocess.run([sys.executable, "-m", "vidagent.cli", "eval", "--help"], capture_output=True,
                               text=True).stdout
    assert "../shared" not in help_text  # no path outside the project


def test_serve_on_a_busy_port_says_so_before_serving(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_cli("serve", "--port", str(port), home=tmp_path, timeout=120)
    assert_one_line_error(result, 2, f"127.0.0.1:{port}: in use")
    assert "serving" not in result.stdout + result.stderr


def test_the_random_baseline_refuses_an_open_question(tmp_path):
    result = run_cli("ask", str(video_path(TEMPORAL_TOY)), "What is drawn?", "--planner", "random", home=tmp_path)
    assert_one_line_error(result, 2, "only picks among options")


def test_a_planner_named_by_module_must_be_a_planner_class(tmp_path):
    """`--planner os:system` called ``os.system()``: any importable callable was called with the options."""
    marker = tmp_path / "called"
    with pytest.raises(PlannerError, match="not a planner class"):
        build_planner("os:system", {"command": f"touch {marker}"})
    assert not marker.exists()
    for name in ("builtins:print", "vidagent.agent.planner:parse_options"):
        with pytest.raises(PlannerError, match="not a planner class"):
            build_planner(name)
    result = run_cli("ask", str(video_path(TEMPORAL_TOY)), "What?", "--planner", "os:getcwd", home=tmp_path)
    assert_one_line_error(result, 2, "not a planner class")
    assert build_planner("vidagent.agent.baselines:RandomPlanner").name == "random"  # a class still loads


def test_a_folder_given_as_a_video_is_named_as_a_folder(tmp_path):
    result = run_cli("ask", str(video_path(TEMPORAL_TOY).parent), "What is drawn?", home=tmp_path)
    assert_one_line_error(result, 2, "a folder, not a file")


def test_the_cli_names_the_chosen_option_by_letter(tmp_path):
    """`Answer: [2] three` beside options the page calls A-E: the CLI says "B. a car", as the page does."""
    result = run_cli("ask", str(video_path(TEMPORAL_TOY)), "What is drawn?", "--choice", "a guitar",
                     "--choice", "a car", "--choice", "a house", "--planner", "random", "-q", home=tmp_path)
    assert result.returncode == 0, result.stderr
    answer = result.stdout.splitlines()[0]
    assert answer in ("Answer: A. a guitar", "Answer: B. a car", "Answer: C. a house"), answer


# -- 6. a false vote ----------------------------------------------------------------------------------------------------
def test_an_mcts_answer_that_names_no_option_is_no_vote_for_one():
    """"The ball is not being held by anyone" was pushed to option B by the which-option call, and the
    result read "puts it in her bag: 2 of 2 answers name this"."""
    from vidagent.agent.mcts import MCTSPlanner
    from vidagent.agent.task import Task
    from fakes import ScriptedLLM
    from test_mcts import COUNT, READ_ALL, TOOLBOX

    choices = ("keeps holding it", "puts it in her bag", "throws it for the dog", "drops it", "gives it away")

    def which_option(messages) -> str:  # a small model told to pick a number picks one
        return "none" if '"none"' in messages[-1].content else "1"

    llm = ScriptedLLM([READ_ALL, "Final Answer: The ball is not being held by anyone", COUNT,
                       "Final Answer: puts it in her bag", which_option])
    answer = MCTSPlanner(n=2, strategy="root", overview_segments=0, seed=7, tie_break="reward").run(
        Task("What does the woman do with the ball?", choices), TOOLBOX, llm)
    assert answer.choice_index == 1
    votes = {c.text: (c.votes, c.choice_index) for c in answer.candidates}
    assert votes == {"puts it in her bag": (1, 1), "The ball is not being held by anyone": (1, None)}
    assert answer.trace[len(answer.trace) - 1].thought == "1 of 2 answers name this"


# -- 11. open questions answered with a bare time ----------------------------------------------------------------------
OPEN_QUESTIONS = [(TEMPORAL_TOY, "Why is the person drawing on the tablet?"),
                  (TEMPORAL_TOY, "What is the person drawing?"),
                  ("github_LLaMA-Factory/3.mp4", "How is the video made?")]


def small_model_reply(messages) -> str:
    """Like the 1.5B model did: a why/what/how question answered with a time it read, unless told to use words."""
    if SELECTION in messages[-1].content:  # the object memory is not needed
        return "no"
    question = messages[1].content
    if "only a number or a time" in messages[-1].content:
        return "Thought: in words, then\nFinal Answer: to show how a guitar is drawn"
    if "Final Answer as the time in seconds" in question:
        return "Thought: it starts there\nFinal Answer: 2.0"
    return "Thought: I now know the final answer\nFinal Answer: 24.0"


def opening_of(llm) -> str:
    """The question as ReAct put it to the model (its first request with a system prompt)."""
    return next(request[1].content for request in llm.requests if request[0].role == "system")


@pytest.mark.parametrize("clip, question", OPEN_QUESTIONS)
def test_an_open_why_what_how_question_is_answered_in_words(temporal_library, models_dir, tmp_path, clip, question):
    """Open why/what/how questions were answered with a bare time (`24.0`): every open question was told
    "a short answer (for a 'when' question, the time in seconds)". It is now asked for words, and a bare
    number is sent back once."""
    home = copy_home(temporal_library, tmp_path / "home")
    settings = replace(Settings.from_env(), home=home, models=models_dir)
    llm = ScriptedLLMFor([small_model_reply] * 6)
    with Session(settings, llm=llm) as session:
        answer = session.ask(video_path(clip), question, planner="react")
    opening = opening_of(llm)
    assert "Final Answer as a short answer in words" in opening and "time in seconds" not in opening
    assert answer.text == "to show how a guitar is drawn"
    kinds = [step.kind for step in answer.trace]
    assert kinds[-2:] == ["format_error", "final_answer"]


def test_a_when_question_still_asks_for_a_time(temporal_library, models_dir, tmp_path):
    home = copy_home(temporal_library, tmp_path / "home")
    settings = replace(Settings.from_env(), home=home, models=models_dir)
    llm = ScriptedLLMFor([small_model_reply] * 6)
    with Session(settings, llm=llm) as session:
        answer = session.ask(video_path(TEMPORAL_TOY), "When does the drawing start?", planner="react")
    assert "Final Answer as the time in seconds" in opening_of(llm)
    assert answer.text == "2.0" and "format_error" not in [step.kind for step in answer.trace]


# -- 4. a truncated video ----------------------------------------------------------------------------------------------
def truncated_copy(folder: Path) -> Path:
    """The first 300 kB of a 9.7-s clip: its header still says 9.7 s, its frames stop before 1 s."""
    path = folder / "cut_short.mp4"
    path.write_bytes(video_path("github_sam2/01_dog.mp4").read_bytes()[:300_000])
    return path


@pytest.mark.clips
def test_a_truncated_video_is_refused_with_what_is_missing(tmp_path):
    """It was indexed as if whole: tracks to 9.5 s from the last readable frame (0.9 s) repeated."""
    path = truncated_copy(tmp_path)
    result = run_cli("index", str(path), home=tmp_path / "home")
    assert_one_line_error(result, 2, "the file is cut short: its video data ends at 0.97 s of the 9.64 s")
    result = run_cli("ask", str(path), "What does the dog do?", home=tmp_path / "home")
    assert_one_line_error(result, 2, "cut short")


# -- 10. models list ----------------------------------------------------------------------------------------------------
def test_models_list_names_every_model_and_how_to_get_a_missing_one(tmp_path, models_dir):
    """It named only the assembled assets: not OCR, Whisper, E5 or MoveNet, nor what was missing."""
    listed = run_cli("models", "list", home=tmp_path, models_dir=models_dir).stdout
    for name in ("rapidocr pp-ocrv5", "whisper tiny.en", "multilingual-e5-small", "movenet", "centernet"):
        assert f"\n{name}: " in "\n" + listed, listed
    empty = run_cli("models", "list", home=tmp_path, models_dir=tmp_path / "none").stdout
    assert "qwen2.5-1.5b: missing (install: vidagent models install qwen2.5-1.5b)  [chat model]" in empty
    assert "centernet: missing (install: vidagent models install centernet)" in empty
