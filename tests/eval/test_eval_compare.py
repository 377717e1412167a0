"""Runs compared (``vidagent eval --compare``): paired on their common questions, cost curves with a point
per budget, and the HTML page opened in a real browser (Debian's chromium driven by Playwright)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from vidagent.eval.pairing import controls_markdown, curve_points, mcnemar_exact, paired
from vidagent.eval.report import write_comparison
from vidagent.eval.runner import RunConfig, run_eval

from vidagent.config import Settings

from test_eval_runner import write_questions

CHROMIUM = Path("/usr/bin/chromium")


def _row(qid: str, correct: bool, calls: int) -> dict:
    return {"id": qid, "correct": correct, "group": "all", "task": "multiple_choice", "error": None,
            "usage": {"llm_calls": calls, "prompt_tokens": 100 * calls}, "wall_s": float(calls), "segments_read": 2}


def test_mcnemars_exact_test_weighs_only_the_questions_one_run_got_right():
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64) and mcnemar_exact(6, 0) == mcnemar_exact(0, 6)
    assert mcnemar_exact(9, 4) == pytest.approx(2 * sum(math.comb(13, k) for k in range(5)) / 2 ** 13)
    assert 0.26 < mcnemar_exact(9, 4) < 0.27  # PEIL against caption_only on 30 EgoSchema questions (session 7)


def test_runs_are_paired_on_the_questions_both_answered():
    a = [_row("q1", True, 1), _row("q2", True, 1), _row("q3", False, 1), _row("q4", True, 1)]
    b = [_row("q1", True, 4), _row("q2", False, 4), _row("q3", True, 4)]  # q4 not answered by b
    p = paired(a, b)
    assert (p.n, p.correct_a, p.correct_b, p.both, p.only_a, p.only_b) == (3, 2, 2, 1, 1, 1)
    assert p.costs_a["llm_calls"] == 1 and p.costs_b["prompt_tokens"] == 400 and p.p_value == 1.0
    shared, curves = curve_points(["react (x)", "react (y)", "caption_only"],
                                  [{"budget": "calls=4"}, {"budget": "calls=1"}, {}], [b, a, a])
    assert shared == 3 and list(curves) == ["react", "caption_only"]
    assert [name for name, _ in curves["react"]] == ["calls=1", "calls=4"]  # a curve in order of cost


def test_each_planner_is_stated_against_the_blind_control_and_the_best_caption_baseline():
    ids = [f"q{i}" for i in range(10)]
    blind = [_row(q, i < 3, 1) for i, q in enumerate(ids)]
    five = [_row(q, i < 5, 5) for i, q in enumerate(ids)]
    everything = [_row(q, i < 4, 1) for i, q in enumerate(ids)]
    planner = [_row(q, i < 8, 9) for i, q in enumerate(ids)]
    metas = [{"planner": "react"}, {"planner": "blind"}, {"planner": "caption_only"}, {"planner": "caption_only"}]
    lines = controls_markdown(["react", "blind", "five", "all"], metas, [planner, blind, five, everything])
    rows = [line for line in lines if line.startswith("| react")]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[:4] == ["react", "10", "80.0", "30.0"] and cells[4].startswith("+50.0 (p = 0.062")
    assert cells[5] == "five" and cells[6] == "50.0" and cells[7].startswith("+30.0")
    assert any(line.startswith("| five") for line in lines)  # a baseline is stated against blind and the other
    assert controls_markdown(["a", "b"], [{"planner": "react"}, {"planner": "mcts"}], [planner, blind]) == []


@pytest.mark.clips
def test_two_real_runs_compared_into_a_page_a_browser_shows(tmp_path, models_dir):
    settings = Settings(home=tmp_path / "home", models=models_dir, experience="none")
    qa = write_questions(tmp_path / "qa.jsonl")
    first = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "plain", progress=False), settings)
    second = run_eval(RunConfig(dataset=qa, planner="random", out=tmp_path / "bounded", progress=False,
                                budget="calls=1"), settings)
    paths = write_comparison([first.out, second.out], tmp_path / "compare")
    markdown = paths["markdown"].read_text()
    n = len(first.rows)
    assert "## Paired, on the questions both runs answered" in markdown and f"| {n} |" in markdown
    assert {"plot", "cost_plot", "html"} <= set(paths) and paths["cost_plot"].stat().st_size > 1000
    cli = subprocess.run([sys.executable, "-m", "vidagent.cli", "eval", "--compare", str(first.out), str(second.out),
                          "--out", str(tmp_path / "cli")], capture_output=True, text=True)
    assert cli.returncode == 0 and (tmp_path / "cli" / "compare.html").is_file(), cli.stderr
    playwright = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (install.sh does)")
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(paths["html"].as_uri())
            assert page.locator("table").count() >= 3  # accuracy, cost, paired
            assert page.locator("h2", has_text="Paired").count() == 1
            page.wait_for_function("[...document.images].length === 2 && "
                                   "[...document.images].every(i => i.complete && i.naturalWidth > 0)")
        finally:
            browser.close()


def test_an_answers_confidence_comes_from_its_likelihood_or_its_votes_and_is_zero_when_it_abstains():
    from vidagent.agent.answer import Answer, Candidate
    from vidagent.agent.task import Task

    task = Task("Which?", ("a", "b", "c"))
    voted = Answer(task, "a", "mcts", 0, candidates=[Candidate("a", 0, votes=3), Candidate("b", 1, votes=1)])
    assert voted.confidence == 0.75 and voted.to_dict()["abstained"] is False
    likely = Answer(task, "b", "react", 1, candidates=[Candidate("b", 1, likelihood=0.62)])
    assert likely.confidence == 0.62
    assert Answer(task, "c", "react", 2, candidates=[Candidate("c", 2)]).confidence is None  # a chain by text
    gave_up = Answer(task, "", "mcts", None, abstained="no answer was reached before the budget was spent")
    assert gave_up.confidence == 0.0 and gave_up.to_dict()["abstain_reason"].startswith("no answer")


def test_calibration_error_and_accuracy_at_coverage():
    from vidagent.eval.metrics import calibration

    rows = [{"confidence": 0.9, "correct": True}, {"confidence": 0.9, "correct": True},
            {"confidence": 0.8, "correct": False}, {"confidence": 0.3, "correct": False},
            {"confidence": None, "correct": True}, {"confidence": 0.0, "correct": False, "abstained": True}]
    rated = calibration(rows)
    # bins: 0.9 x2 (acc 1: gap 0.1), 0.8 (acc 0: 0.8), 0.3 (0.3), 0.0 (0.0) -> (0.2 + 0.8 + 0.3 + 0) / 5
    assert rated["n"] == 5 and abs(rated["ece"] - 0.26) < 1e-9 and rated["abstained"] == 1
    assert rated["accuracy_at_50"] == 2 / 2 and rated["accuracy_at_80"] == 2 / 4 and rated["accuracy_at_100"] == 2 / 5
    assert rated["accuracy_answered"] == 3 / 5  # of the five scored answers that did not abstain
    assert calibration([{"confidence": None, "correct": True}]) is None
