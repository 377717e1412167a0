"""Metrics: scoring one prediction (multiple choice, open-ended, localization), time-window overlap
(IoU, IoP, Ego4D NLQ R@k), and accuracy and cost per question over groups of results."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from vidagent.text import normalise_answer

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def open_ended_correct(prediction: str, answer: str, accept: Sequence[str] = ()) -> bool:
    """True when an accepted answer appears, as whole words, in the normalised prediction."""
    predicted = f" {normalise_answer(prediction)} "
    for candidate in (answer, *accept):
        target = normalise_answer(candidate)
        if target and f" {target} " in predicted:
            return True
    return False


def predicted_times(prediction: str) -> list[float]:
    """Numbers in an answer, read as seconds ("1.5 s", "between 2 and 3 seconds")."""
    return [float(x) for x in _NUMBER.findall(prediction)]


def localization_correct(prediction: str, span_s: Sequence[float], tolerance_s: float = 0.5) -> bool:
    """True when the predicted time (or the middle of a predicted range) falls in the span ± tolerance."""
    times = predicted_times(prediction)
    if not times:
        return False
    start, end = span_s
    guess = (times[0] + times[1]) / 2 if len(times) >= 2 and times[1] > times[0] else times[0]
    return start - tolerance_s <= guess <= end + tolerance_s


# -- time windows --------------------------------------------------------------------------------
Window = tuple[float, float]
_RANGE = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:s|sec|seconds?)?\s*(?:-|–|to|and|until)\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two [start, end] windows (0 when either is empty and apart)."""
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else float(a[0] == b[0] and a[1] == b[1])


def iop(prediction: Sequence[float], gold: Sequence[float]) -> float:
    """Intersection over the prediction's length (NExT-GQA's IoP)."""
    inter = max(0.0, min(prediction[1], gold[1]) - max(prediction[0], gold[0]))
    length = prediction[1] - prediction[0]
    return inter / length if length > 0 else float(gold[0] <= prediction[0] <= gold[1])


def windows_from_text(text: str, point_width_s: float = 2.0) -> list[Window]:
    """Time windows an answer names, in order: ranges ("3-5 s", "from 3 to 5", "between 3 and 5"),
    else single times widened to ``point_width_s`` around them."""
    windows: list[Window] = []
    for match in _RANGE.finditer(text):
        start, end = float(match.group(1)), float(match.group(2))
        if end > start >= 0:
            windows.append((start, end))
    if windows:
        return windows
    half = point_width_s / 2
    return [(max(0.0, t - half), t + half) for t in predicted_times(text) if t >= 0]


def ranked_windows(text: str, evidence: Sequence[Sequence[float]], k: int = 5) -> list[Window]:
    """Up to ``k`` distinct candidate windows: those the answer names first, then the evidence spans."""
    ranked: list[Window] = []
    for window in [*windows_from_text(text), *((float(e[0]), float(e[1])) for e in evidence)]:
        if window[1] > window[0] and window not in ranked:
            ranked.append(window)
        if len(ranked) == k:
            break
    return ranked


def recall_at_k(predictions: Sequence[Sequence[Window]], golds: Sequence[Window], k: int, threshold: float) -> float:
    """Ego4D NLQ R@k: the share of queries with a top-``k`` window of IoU >= ``threshold`` with the gold one."""
    if not golds:
        return 0.0
    hits = sum(any(iou(w, gold) >= threshold for w in windows[:k]) for windows, gold in zip(predictions, golds))
    return hits / len(golds)


def mean_iou(predictions: Sequence[Sequence[Window]], golds: Sequence[Window]) -> float:
    """Mean IoU of the top-1 window with the gold one (0 for a query without a prediction)."""
    if not golds:
        return 0.0
    return sum(iou(windows[0], gold) if windows else 0.0 for windows, gold in zip(predictions, golds)) / len(golds)


# -- aggregates over result rows -------------------------------------------------------------------
COST_KEYS = ("llm_calls", "cached_calls", "prompt_tokens", "completion_tokens", "seconds", "reused_prompt_tokens")


@dataclass(frozen=True)
class GroupStats:
    """Accuracy and mean cost per question of one group of answered questions."""

    name: str
    n: int
    scored: int
    correct: int
    errors: int
    llm_calls: float
    cached_calls: float
    prompt_tokens: float
    completion_tokens: float
    llm_seconds: float
    wall_seconds: float
    reused_prompt_tokens: float = 0.0  # of prompt_tokens, those read from the model's KV/prefix cache
    segments_read: float = 0.0  # distinct segments (captions, for an imported memory) the planner was shown

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.scored if self.scored else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "accuracy": self.accuracy}


def group_stats(name: str, rows: Sequence[Mapping[str, Any]]) -> GroupStats:
    """Accuracy over rows with a known answer (``correct`` not None), cost averaged over all rows.

    A question's cost counts the planner's and, when used, the judge's LLM calls.
    """
    n = len(rows)
    scored = [r for r in rows if r.get("correct") is not None]

    def mean(key: str) -> float:
        if not n:
            return 0.0
        total = sum(float((r.get("usage") or {}).get(key, 0)) + float((r.get("judge_usage") or {}).get(key, 0))
                    for r in rows)
        return total / n

    return GroupStats(
        name=name, n=n, scored=len(scored), correct=sum(bool(r["correct"]) for r in scored),
        errors=sum(1 for r in rows if r.get("error")), llm_calls=mean("llm_calls"), cached_calls=mean("cached_calls"),
        prompt_tokens=mean("prompt_tokens"), completion_tokens=mean("completion_tokens"), llm_seconds=mean("seconds"),
        wall_seconds=sum(float(r.get("wall_s", 0.0)) for r in rows) / n if n else 0.0,
        reused_prompt_tokens=mean("reused_prompt_tokens"),
        segments_read=sum(float(r.get("segments_read") or 0) for r in rows) / n if n else 0.0,
    )


def stats_by_group(rows: Sequence[Mapping[str, Any]]) -> list[GroupStats]:
    """One ``GroupStats`` per question group (dataset order of first appearance), then ``all``."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get("group") or "all"), []).append(row)
    stats = [group_stats(name, members) for name, members in groups.items() if name != "all" or len(groups) == 1]
    if len(groups) > 1 or "all" not in groups:
        stats.append(group_stats("all", rows))
    return stats


def localization_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """R@1/R@5 at IoU 0.3/0.5 and mean IoU over localization rows with a gold window, else None."""
    rows = [r for r in rows if r.get("task") == "localization" and (r.get("gold") or {}).get("spans")]
    if not rows:
        return None
    predictions = [[tuple(w) for w in r.get("windows") or []] for r in rows]
    golds = [tuple(r["gold"]["spans"][0]) for r in rows]
    metrics: dict[str, float] = {"n": float(len(rows))}
    for k in (1, 5):
        for threshold in (0.3, 0.5):
            metrics[f"R@{k} IoU={threshold}"] = recall_at_k(predictions, golds, k, threshold)  # type: ignore[arg-type]
    metrics["mIoU"] = mean_iou(predictions, golds)  # type: ignore[arg-type]
    return metrics


def grounding_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """NExT-GQA style grounding of question-answering rows with gold spans: mIoP, IoP@0.5, mIoU,
    IoU@0.5 of the top evidence window against the best-matching gold span, and Acc@GQA
    (correct and IoP >= 0.5). None when no row has both gold spans and a window."""
    rows = [r for r in rows if r.get("task") != "localization" and r.get("dataset_grounded")
            and (r.get("gold") or {}).get("spans")]
    if not rows:
        return None
    iops, ious, both = [], [], 0
    for row in rows:
        windows = row.get("windows") or []
        spans = row["gold"]["spans"]
        best_iop = max((iop(windows[0], s) for s in spans), default=0.0) if windows else 0.0
        best_iou = max((iou(windows[0], s) for s in spans), default=0.0) if windows else 0.0
        iops.append(best_iop)
        ious.append(best_iou)
        both += bool(row.get("correct")) and best_iop >= 0.5
    n = len(rows)
    return {
        "n": float(n), "mIoP": sum(iops) / n, "IoP@0.5": sum(v >= 0.5 for v in iops) / n,
        "mIoU": sum(ious) / n, "IoU@0.5": sum(v >= 0.5 for v in ious) / n, "Acc@GQA": both / n,
    }


CALIBRATION_BINS = 10
COVERAGES = (0.5, 0.8, 1.0)


def auroc(scores: Sequence[float], correct: Sequence[bool]) -> float | None:
    """The probability that a right answer's score exceeds a wrong one's (ties count half): how well the scores
    separate right from wrong (0.5: not at all); None without both a right and a wrong answer."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    start = 0
    while start < len(order):  # mid-ranks for ties
        end = start
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    right = sum(1 for ok in correct if ok)
    wrong = len(correct) - right
    if not right or not wrong:
        return None
    rank_sum = sum(rank for rank, ok in zip(ranks, correct) if ok)
    return (rank_sum - right * (right + 1) / 2) / (right * wrong)


def calibration(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None] | None:
    """How well the answers' confidence tells right from wrong, over the scored rows that have one:
    its AUROC (``auroc``), the expected calibration error (10 equal-width bins: the mean gap between confidence and accuracy,
    weighted by the bin's share), accuracy on the 50, 80 and 100 % most confident answers, how many abstained
    and accuracy on the scored answers that did not (``accuracy_answered``; None when every one abstained). None when
    no row has a confidence (a planner that chooses by text in a single chain has none)."""
    rated = [(float(r["confidence"]), bool(r["correct"])) for r in rows
             if r.get("confidence") is not None and r.get("correct") is not None]
    if not rated:
        return None
    error = 0.0
    for b in range(CALIBRATION_BINS):
        low, high = b / CALIBRATION_BINS, (b + 1) / CALIBRATION_BINS
        members = [(c, ok) for c, ok in rated if low <= c < high or (b == CALIBRATION_BINS - 1 and c == 1.0)]
        if members:
            gap = abs(sum(c for c, _ in members) / len(members) - sum(ok for _, ok in members) / len(members))
            error += gap * len(members) / len(rated)
    ranked = sorted(rated, key=lambda item: -item[0])
    result: dict[str, float | None] = {"n": float(len(rated)), "ece": error,
                                       "auroc": auroc([c for c, _ in rated], [ok for _, ok in rated])}
    for coverage in COVERAGES:
        kept = ranked[: max(1, round(coverage * len(ranked)))]
        result[f"accuracy_at_{int(coverage * 100)}"] = sum(ok for _, ok in kept) / len(kept)
    result["abstained"] = float(sum(1 for r in rows if r.get("abstained")))
    kept = [bool(r["correct"]) for r in rows if not r.get("abstained") and r.get("correct") is not None]
    result["accuracy_answered"] = sum(kept) / len(kept) if kept else None
    return result
