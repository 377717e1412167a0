"""Metrics against values computed by hand."""

from __future__ import annotations

import pytest

from vidagent.agent.answer import Answer
from vidagent.agent.task import Task
from vidagent.eval.dataset import LOCALIZATION, MULTIPLE_CHOICE, OPEN_ENDED, EvalItem
from vidagent.eval.metrics import (
    group_stats,
    grounding_metrics,
    iop,
    iou,
    localization_metrics,
    mean_iou,
    open_ended_correct,
    ranked_windows,
    recall_at_k,
    stats_by_group,
    windows_from_text,
)
from vidagent.eval.report import RunRecord, compare_markdown, markdown_report
from vidagent.eval.scoring import score_answer
from vidagent.tools.base import Evidence


def test_iou_and_iop():
    assert iou((0, 2), (1, 3)) == pytest.approx(1 / 3)  # overlap 1, union 3
    assert iou((0, 10), (2, 4)) == pytest.approx(0.2)
    assert iou((0, 1), (2, 3)) == 0.0
    assert iop((2, 4), (0, 10)) == 1.0  # the prediction lies inside the gold span
    assert iop((0, 4), (2, 10)) == pytest.approx(0.5)


def test_windows_from_answer_text():
    assert windows_from_text("between 1.2 and 3 s") == [(1.2, 3.0)]
    assert windows_from_text("from 4 s to 6.5 seconds") == [(4.0, 6.5)]
    assert windows_from_text("1.1-1.9 s") == [(1.1, 1.9)]
    assert windows_from_text("at about 4 s") == [(3.0, 5.0)]  # a point widened to 2 s
    assert windows_from_text("no idea") == []
    # the answer's own windows first, then evidence spans, without repeats, at most k
    assert ranked_windows("3-5", [(3, 5), (0, 2), (6, 8)], k=2) == [(3.0, 5.0), (0.0, 2.0)]


def test_recall_at_k_and_mean_iou():
    golds = [(10.0, 14.0), (0.0, 2.0), (5.0, 6.0)]
    predictions = [
        [(11.0, 13.0), (30.0, 40.0)],  # top-1 IoU 0.5
        [(3.0, 4.0), (0.0, 1.5)],      # top-1 IoU 0, second IoU 0.75
        [],                            # nothing predicted
    ]
    assert recall_at_k(predictions, golds, 1, 0.3) == pytest.approx(1 / 3)
    assert recall_at_k(predictions, golds, 1, 0.5) == pytest.approx(1 / 3)
    assert recall_at_k(predictions, golds, 5, 0.5) == pytest.approx(2 / 3)
    assert recall_at_k(predictions, golds, 5, 0.8) == 0.0
    assert mean_iou(predictions, golds) == pytest.approx(0.5 / 3)


def test_open_ended_matching_normalises_and_uses_the_accept_list():
    assert open_ended_correct("The woman throws a Ball!", "a ball")
    assert open_ended_correct("it is an orange toy", "ball", ["orange toy"])
    assert not open_ended_correct("a balloon", "ball")


def _row(group, correct, calls=0, prompt=0, completion=0, seconds=0.0, wall=0.0, task=MULTIPLE_CHOICE, error=None):
    return {"group": group, "task": task, "correct": correct, "error": error, "wall_s": wall,
            "usage": {"llm_calls": calls, "cached_calls": 0, "prompt_tokens": prompt, "completion_tokens": completion,
                      "seconds": seconds}}


def test_accuracy_per_group_and_cost_per_question():
    rows = [
        _row("causal", True, calls=2, prompt=100, completion=10, seconds=1.0, wall=2.0),
        _row("causal", False, calls=4, prompt=300, completion=30, seconds=3.0, wall=4.0, error="LLM down"),
        _row("temporal", True, calls=1, prompt=50, completion=5, seconds=0.5, wall=1.0),
        _row("descriptive", None, calls=1, prompt=50, completion=5, seconds=0.5, wall=1.0),  # no answer key
    ]
    stats = {s.name: s for s in stats_by_group(rows)}
    assert list(stats) == ["causal", "temporal", "descriptive", "all"]
    causal = stats["causal"]
    assert (causal.n, causal.scored, causal.correct, causal.accuracy, causal.errors) == (2, 2, 1, 0.5, 1)
    assert (causal.llm_calls, causal.prompt_tokens, causal.completion_tokens) == (3.0, 200.0, 20.0)
    assert (causal.llm_seconds, causal.wall_seconds) == (2.0, 3.0)
    assert stats["descriptive"].accuracy is None
    total = stats["all"]
    assert total.accuracy == pytest.approx(2 / 3)  # unscored questions are left out of accuracy...
    assert total.llm_calls == pytest.approx(8 / 4)  # ...but their cost counts
    judged = dict(_row("x", True, calls=1, prompt=10), judge_usage={"llm_calls": 1, "prompt_tokens": 20})
    assert group_stats("x", [judged]).llm_calls == 2 and group_stats("x", [judged]).prompt_tokens == 30


def test_nextqa_table_names_acc_c_t_d_a():
    rows = [_row("causal", True), _row("temporal", False), _row("descriptive", True), _row("descriptive", True)]
    text = markdown_report(RunRecord(label="react", folder=None, meta={"planner": "react"}, rows=rows))  # type: ignore[arg-type]
    assert "| causal (Acc_C) | 1 | 100.0 |" in text
    assert "| temporal (Acc_T) | 1 | 0.0 |" in text
    assert "| descriptive (Acc_D) | 2 | 100.0 |" in text
    assert "| all (Acc_A) | 4 | 75.0 |" in text
    other = RunRecord(label="random", folder=None, meta={"planner": "random"}, rows=[_row("causal", False)] * 4)  # type: ignore[arg-type]
    side_by_side = compare_markdown([RunRecord(label="react", folder=None, meta={}, rows=rows), other])  # type: ignore[arg-type]
    assert "| causal (Acc_C) | 1 | 100.0 | 0.0 |" in side_by_side


def test_localization_and_grounding_metrics_over_rows():
    rows = [
        {"task": LOCALIZATION, "gold": {"spans": [[10, 14]]}, "windows": [[11, 13]], "correct": True},
        {"task": LOCALIZATION, "gold": {"spans": [[0, 2]]}, "windows": [[3, 4], [0, 1.5]], "correct": False},
    ]
    metrics = localization_metrics(rows)
    assert metrics["R@1 IoU=0.3"] == 0.5 and metrics["R@5 IoU=0.5"] == 1.0 and metrics["mIoU"] == pytest.approx(0.25)
    grounded = [
        {"task": MULTIPLE_CHOICE, "dataset_grounded": True, "gold": {"spans": [[0, 4], [8, 10]]}, "windows": [[8, 9]],
         "correct": True},   # IoP 1, IoU 0.5
        {"task": MULTIPLE_CHOICE, "dataset_grounded": True, "gold": {"spans": [[0, 4]]}, "windows": [[2, 6]],
         "correct": False},  # IoP 0.5, IoU 1/3
    ]
    g = grounding_metrics(grounded)
    assert g["mIoP"] == pytest.approx(0.75) and g["IoP@0.5"] == 1.0
    assert g["mIoU"] == pytest.approx((0.5 + 1 / 3) / 2) and g["IoU@0.5"] == 0.5
    assert g["Acc@GQA"] == 0.5
    assert grounding_metrics(rows) is None


def answer(text: str, choices: list[str] | None = None, choice_index: int | None = None, **fields) -> Answer:
    return Answer(task=Task("q", tuple(choices) if choices else None), text=text, planner="test",
                  choice_index=choice_index, **fields)


def test_scoring_one_answer_per_task():
    mc = EvalItem(id="a", video="v", question="q", task=MULTIPLE_CHOICE, choices=("x", "y"), answer_index=1)
    assert score_answer(mc, answer("y", ["x", "y"], 1))["correct"] is True
    assert score_answer(mc, answer("x", ["x", "y"], 0))["correct"] is False
    assert score_answer(mc, answer("?", ["x", "y"]))["correct"] is False
    open_item = EvalItem(id="b", video="v", question="q", task=OPEN_ENDED, answer="ball", accept=("toy",))
    assert score_answer(open_item, answer("A toy."))["correct"] is True
    loc = EvalItem(id="c", video="v", question="q", task=LOCALIZATION, spans=((1.1, 1.9),))
    named = score_answer(loc, answer("around 1.5 s"))
    assert named["correct"] is True and named["windows"] == [[0.5, 2.5]] and named["iou"] == pytest.approx(0.4)
    by_evidence = score_answer(loc, answer("when it jumps",
                                           evidence=[Evidence(start_s=1.0, end_s=2.0, text="jump")]))
    assert by_evidence["correct"] is True and by_evidence["iou"] == pytest.approx(0.8)
    checked = [Evidence(0.0, 1.0, "a first caption", supports=False), Evidence(5.0, 6.0, "not re-read"),
               Evidence(1.0, 2.0, "jump", supports=True)]
    by_check = score_answer(loc, answer("when it jumps", evidence=checked))
    assert by_check["windows"][:3] == [[1.0, 2.0], [5.0, 6.0], [0.0, 1.0]] and by_check["correct"] is True
    hidden = EvalItem(id="d", video="v", question="q", task=MULTIPLE_CHOICE, choices=("x", "y"))
    assert score_answer(hidden, answer("x", ["x", "y"], 0))["correct"] is None
