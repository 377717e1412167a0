"""Scoring one answer against its question: the fields a result row keeps about correctness."""

from __future__ import annotations

from typing import Any

from vidagent.agent.answer import Answer
from vidagent.eval.dataset import LOCALIZATION, MULTIPLE_CHOICE, EvalItem
from vidagent.eval.metrics import iou, localization_correct, open_ended_correct, ranked_windows, windows_from_text

TOP_WINDOWS = 5
_SUPPORT_RANK = {True: 0, None: 1, False: 2}


def score_answer(item: EvalItem, answer: Answer) -> dict[str, Any]:
    """``correct`` (None when the dataset gives no answer), ``match`` (the rule-based verdict before any
    judge), ranked ``windows`` (from the answer's text, then its evidence: first what the check found
    supporting the answer, then what it did not re-read, then what it re-read and found silent) and the top
    window's ``iou``.

    Multiple choice: the chosen index equals the key. Open-ended: an accepted answer appears, as whole
    words, in the normalised prediction. Localization: the named time (or the middle of the named
    range, or of the top evidence window) falls inside the gold span +- 0.5 s.
    """
    ranked = sorted(answer.evidence, key=lambda e: _SUPPORT_RANK[e.supports])  # stable: the planner's order within
    evidence = [(e.start_s, e.end_s) for e in ranked]
    windows = ranked_windows(answer.text, evidence, TOP_WINDOWS)
    correct: bool | None
    if not item.has_key:
        correct = None
    elif item.task == MULTIPLE_CHOICE:
        correct = answer.choice_index is not None and answer.choice_index == item.answer_index
    elif item.task == LOCALIZATION:
        text = answer.text
        if not windows_from_text(text) and windows:  # no time named: the top evidence window stands in
            text = f"{windows[0][0]} - {windows[0][1]}"
        correct = localization_correct(text, item.spans[0])
    else:
        correct = open_ended_correct(answer.text, item.answer, item.accept)
    top_iou = iou(windows[0], item.spans[0]) if windows and item.spans else None
    return {
        "correct": correct,
        "match": correct,
        "windows": [[round(a, 3), round(b, 3)] for a, b in windows],
        "iou": None if top_iou is None else round(top_iou, 4),
    }
